// GGUF metadata built in memory, for gguf_file::assemble: the key/value list and one constructor
// per value type the Hugging Face readers write (model/formats/hf_folder.cpp for config.json,
// model/text/hf_tokenizer.cpp and model/text/hf_spm.cpp for the tokenizer.* keys).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/formats/gguf.hpp"

namespace conveyor::model {

using gguf_kvs = std::vector<std::pair<std::string, gguf_value>>;

gguf_value gguf_u32(uint32_t x);
gguf_value gguf_f32(float x);
gguf_value gguf_bool(bool x);
gguf_value gguf_str(std::string s);
gguf_value gguf_strs(std::vector<std::string> items);
gguf_value gguf_i32s(const std::vector<int32_t>& items);
gguf_value gguf_f32s(const std::vector<float>& items);

} // namespace conveyor::model
