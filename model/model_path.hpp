// Where models live: named models (`smollm2`) in the cache directory, or any GGUF path.
#pragma once

#include <string>

namespace conveyor::model {

/// $CONVEYOR_CACHE when set, else ~/.cache/conveyor/models.
std::string models_dir();

/// Turns a model argument into a file path: a known name maps to its file in models_dir(),
/// anything else is taken as a path. Throws model_error (with the fix) when nothing is there.
std::string resolve_model(const std::string& name_or_path);

} // namespace conveyor::model
