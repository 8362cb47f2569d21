// tokenizer::from_gguf: the vocabulary from GGUF metadata, with llama.cpp's defaults for absent
// keys (llama_vocab::impl::load): SentencePiece ("llama") bos 1, eos 2, unk 0, add_bos_token true,
// add_space_prefix true; byte-level BPE add_bos_token from the pre type (true for llama3).
// Unlike llama.cpp, an absent BPE bos/eos stays unset (llama.cpp's default there is id 11).
#include "model/formats/gguf.hpp"
#include "model/text/pretokenize.hpp"
#include "model/text/tokenizer.hpp"

namespace conveyor::model {
namespace {

std::vector<float> read_scores(const gguf_file& f) {
  const char* key = "tokenizer.ggml.scores";
  try {
    return f.get_float_array(key);
  } catch (const gguf_error&) {
    std::vector<float> out;  // llama.cpp also takes int32 scores
    for (int64_t s : f.get_int_array(key)) out.push_back(float(s));
    return out;
  }
}

} // namespace

tokenizer tokenizer::from_gguf(const gguf_file& f) {
  try {
    vocab_data v;
    const auto model = f.get_string("tokenizer.ggml.model");
    if (!model) throw tokenizer_error("tokenizer.ggml.model is missing");
    v.model = *model;
    const bool spm = v.model == "llama";
    v.pre = f.get_string("tokenizer.ggml.pre").value_or("default");
    v.tokens = f.get_string_array("tokenizer.ggml.tokens");
    const auto n = int64_t(v.tokens.size());
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.token_types.push_back(int32_t(t));
    v.merges = f.get_string_array("tokenizer.ggml.merges");
    if (spm) v.scores = read_scores(f);

    auto id_of = [&](const char* key, token_id absent) -> token_id {
      const auto id = f.get_int(key);
      if (!id) return absent < n ? absent : -1;
      if (*id < 0 || *id >= n) {
        throw tokenizer_error(std::string(key) + " " + std::to_string(*id) + " is out of range (vocabulary has " +
                              std::to_string(n) + " tokens)");
      }
      return token_id(*id);
    };
    v.bos = id_of("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
    v.eos = id_of("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
    v.unk = id_of("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
    v.pad = id_of("tokenizer.ggml.padding_token_id", -1);
    // The ids found by text when absent; llama.cpp ignores an out-of-range one, and so do we.
    auto optional_id = [&](const char* key) -> token_id {
      const auto id = f.get_int(key);
      return id && *id >= 0 && *id < n ? token_id(*id) : -1;
    };
    v.eot = optional_id("tokenizer.ggml.eot_token_id");
    v.eom = optional_id("tokenizer.ggml.eom_token_id");
    v.fim_pre = optional_id("tokenizer.ggml.fim_pre_token_id");
    v.fim_suf = optional_id("tokenizer.ggml.fim_suf_token_id");
    v.fim_mid = optional_id("tokenizer.ggml.fim_mid_token_id");
    v.fim_pad = optional_id("tokenizer.ggml.fim_pad_token_id");
    v.fim_rep = optional_id("tokenizer.ggml.fim_rep_token_id");
    v.fim_sep = optional_id("tokenizer.ggml.fim_sep_token_id");
    // The deprecated spellings win when present, as llama.cpp reads them last.
    if (const token_id id = optional_id("tokenizer.ggml.prefix_token_id"); id >= 0) v.fim_pre = id;
    if (const token_id id = optional_id("tokenizer.ggml.suffix_token_id"); id >= 0) v.fim_suf = id;
    if (const token_id id = optional_id("tokenizer.ggml.middle_token_id"); id >= 0) v.fim_mid = id;

    const auto pre = find_pre(v.pre);
    v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(spm || (pre && pre->add_bos));
    v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
    v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
    v.chat_template = f.get_string("tokenizer.chat_template").value_or("");
    return tokenizer(std::move(v));
  } catch (const tokenizer_error& e) {
    throw tokenizer_error(f.path() + ": " + e.what());
  } catch (const gguf_error& e) {
    throw tokenizer_error(e.what());  // already "<path>: <problem>"
  }
}

} // namespace conveyor::model
