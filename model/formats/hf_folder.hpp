// Hugging Face model folders (config.json, tokenizer.json or SentencePiece tokenizer.model,
// tokenizer_config.json, *.safetensors, single or sharded with model.safetensors.index.json; F32,
// F16 or BF16) opened as the GGUF that llama.cpp's convert_hf_to_gguf.py would write from them, so
// every loader and executor reads them unchanged. Tensors are views into the mapped safetensors files except Llama/Mistral's Q
// and K (rows permuted for the adjacent-pair RoPE, as the converter does) and the 1-D norms and
// biases (F32, as the converter stores them), which are owned copies.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

#include "model/formats/gguf.hpp"
#include "model/formats/gguf_kvs.hpp"

namespace conveyor::model {

/// "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM".
std::string supported_hf_architectures();

/// Appends the tokenizer.* keys for the folder `dir` whose config.json is `config` and whose
/// vocabulary is `n_vocab` tokens long: model/text/hf_tokenizer.hpp's add_hf_tokenizer, passed in
/// by model/model_path.cpp so that model/formats/ needs no tokenizer library.
using hf_tokenizer_reader = void (*)(const std::string& dir, const nlohmann::json& config, int64_t n_vocab,
                                     gguf_kvs& kvs);

/// Opens the folder `dir`; `add_tokenizer` runs once the embedding's shape is checked, before any
/// weight is copied. Throws model_error (config.json, the weights) or tokenizer_error
/// (tokenizer.json, or tokenizer.model for SentencePiece vocabularies), each one line "<file>: <problem and fix>": another architecture or dtype,
/// rope_scaling other than linear and llama3, a missing file or tensor, a wrong shape, a
/// malformed JSON file or safetensors header.
gguf_file open_hf_folder(const std::string& dir, hf_tokenizer_reader add_tokenizer);

} // namespace conveyor::model
