// Internal to model/: the pieces model/hf_folder.cpp assembles a GGUF view from. GGUF metadata
// values, and the tokenizer.* keys that llama.cpp's convert_hf_to_gguf.py writes for a folder's
// tokenizer.json / tokenizer_config.json (model/hf_tokenizer.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf.hpp"

namespace conveyor::model {

using gguf_kvs = std::vector<std::pair<std::string, gguf_value>>;

gguf_value gguf_u32(uint32_t x);
gguf_value gguf_f32(float x);
gguf_value gguf_bool(bool x);
gguf_value gguf_str(std::string s);
gguf_value gguf_strs(std::vector<std::string> items);
gguf_value gguf_i32s(const std::vector<int32_t>& items);

/// Appends tokenizer.ggml.{model, pre, tokens, token_type, merges, *_token_id, add_*_token} and
/// tokenizer.chat_template for the byte-level BPE tokenizer.json in `dir`, `n_vocab` tokens long
/// (ids the file does not name become "[PAD<id>]", unused, as the converter writes them).
/// `config` is config.json (its *_token_id fill in what tokenizer_config.json leaves unset).
/// Throws tokenizer_error("<file>: <problem and fix>") for a SentencePiece or otherwise
/// unsupported tokenizer, and model_error for a missing or malformed file.
void add_hf_tokenizer(const std::string& dir, const nlohmann::json& config, int64_t n_vocab, gguf_kvs& kvs);

} // namespace conveyor::model
