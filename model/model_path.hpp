// Where models live: named models (`smollm2`) in the cache directory, GGUF files, and Hugging
// Face model folders; open_model() is the one place that turns either format into a gguf_file.
#pragma once

#include <string>

#include "model/formats/gguf.hpp"

namespace conveyor::model {

/// $CONVEYOR_CACHE when set, else ~/.cache/conveyor/models.
std::string models_dir();

/// Turns a model argument into a path: a known name maps to its file in models_dir(), anything
/// else is taken as a GGUF file or a Hugging Face folder. Throws model_error (with the fix) when
/// nothing is there.
std::string resolve_model(const std::string& name_or_path);

/// Opens what resolve_model() returned: a directory as a Hugging Face folder
/// (model/formats/hf_folder.hpp), anything else as a GGUF file. Throws gguf_error, model_error or
/// tokenizer_error, each one line naming the file and the problem.
gguf_file open_model(const std::string& path);

} // namespace conveyor::model
