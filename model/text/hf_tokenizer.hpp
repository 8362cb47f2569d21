// Internal to model/: the tokenizer.* keys that llama.cpp's convert_hf_to_gguf.py writes for a
// Hugging Face folder's tokenizer, which model/formats/hf_folder.cpp adds to the folder's GGUF view
// (model/model_path.cpp hands it add_hf_tokenizer): byte-level BPE from tokenizer.json
// (model/text/hf_tokenizer.cpp), SentencePiece from tokenizer.model (model/text/hf_spm.cpp), plus
// what both take from tokenizer_config.json.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/formats/gguf_kvs.hpp"

namespace conveyor::model {

/// What gguf-py's SpecialVocab takes from a folder for every kind of tokenizer: the bos/eos/unk/pad
/// ids (tokenizer_config.json's *_token matched against tokenizer.json's added_tokens, then
/// config.json's *_token_id; ids outside [0, n_vocab) are dropped), add_bos/add_eos
/// (tokenizer.json's post-processor, then tokenizer_config.json's add_*_token) and the chat template.
struct hf_special_vocab {
  std::optional<int64_t> bos, eos, unk, pad;
  std::optional<bool> add_bos, add_eos;
  std::string chat_template;
};
/// `tok` is tokenizer.json (null when the folder has none), `tcfg` tokenizer_config.json ({} when
/// none). Throws model_error / tokenizer_error naming the file for a malformed entry.
hf_special_vocab read_hf_special_vocab(const std::string& dir, const nlohmann::json& tok, const nlohmann::json& tcfg,
                                       const nlohmann::json& config, int64_t n_vocab);
/// Appends tokenizer.ggml.{bos,eos,unknown,padding}_token_id, add_{bos,eos}_token and
/// tokenizer.chat_template for the ones that are set.
void add_hf_special_vocab(const hf_special_vocab& s, gguf_kvs& kvs);
/// The folder's tokenizer_config.json, {} when it has none; tokenizer_error when it is not an
/// object, model_error when it is not JSON.
nlohmann::json read_hf_tokenizer_config(const std::string& dir);
/// convert_hf_to_gguf.py does_token_look_special: <pad>, <mask>, <|...|>, <unused...>, ...
bool hf_looks_special(const std::string& text);
/// "; convert the model with llama.cpp's convert_hf_to_gguf.py and pass the GGUF"
extern const char* const kHfConvertHint;

/// Appends the tokenizer.* keys for the folder's tokenizer, `n_vocab` tokens long (ids the files
/// do not name become "[PAD<id>]", unused, as the converter writes them). `config` is config.json.
/// With a tokenizer.model (Llama 2, Mistral 7B) the SentencePiece vocabulary is read from it, as
/// the converter does even when a tokenizer.json is there too; otherwise tokenizer.json must be a
/// byte-level BPE. Throws tokenizer_error("<file>: <problem and fix>") for an unsupported or
/// unreadable tokenizer (a byte_fallback tokenizer.json without tokenizer.model among them), and
/// model_error for a missing or malformed JSON file.
void add_hf_tokenizer(const std::string& dir, const nlohmann::json& config, int64_t n_vocab, gguf_kvs& kvs);

/// The SentencePiece half of add_hf_tokenizer: `dir`/tokenizer.model -> tokenizer.ggml.model
/// "llama" and its tokens, scores, token types, special ids, add_bos/add_space_prefix
/// (model/text/hf_spm.cpp).
void add_hf_spm_tokenizer(const std::string& dir, const nlohmann::json& config, int64_t n_vocab, gguf_kvs& kvs);

} // namespace conveyor::model
