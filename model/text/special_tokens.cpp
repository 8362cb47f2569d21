// The text lists are llama.cpp's (llama-vocab.cpp, llama-cpp-python 0.3.36's vendored copy), so a
// vocabulary stops where llama.cpp stops: Qwen2.5's <|im_end|>, <|endoftext|> and its FIM
// <|fim_pad|>, <|repo_name|>, <|file_sep|>; Llama 3's <|eot_id|>, <|eom_id|>, <|end_of_text|>;
// SentencePiece's </s>; SmolLM2's <reponame>. Two llama.cpp workarounds for tokenizers we do not
// load (gpt-oss's <|end|>, Gemma 4's </s>) are reproduced too, so the rule is the whole rule.
#include "model/text/special_tokens.hpp"

#include <algorithm>
#include <initializer_list>
#include <string_view>

namespace conveyor::model {
namespace {

using texts = std::initializer_list<std::string_view>;

const texts eot_texts = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                         "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                         "<end_of_utterance>"};
const texts eom_texts = {"<|eom_id|>"};
const texts fim_pre_texts = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>",
                             "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"};
const texts fim_suf_texts = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>",
                             "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"};
const texts fim_mid_texts = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
                             "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"};
const texts fim_pad_texts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const texts fim_rep_texts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
const texts fim_sep_texts = {"<|file_sep|>"};
const texts eog_texts = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                         "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                         "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                         "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["};

bool one_of(std::string_view s, texts list) { return std::find(list.begin(), list.end(), s) != list.end(); }

/// The key's id if set, else the lowest id whose text is in `list` (made a control token), else -1.
token_id by_key_or_text(token_id key, texts list, const vocab_data& v, std::vector<token_kind>& kinds) {
  if (key >= 0) return key;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (one_of(v.tokens[i], list)) {
      kinds[i] = token_kind::control;
      return token_id(i);
    }
  }
  return -1;
}

} // namespace

std::vector<token_id> find_eog_ids(const vocab_data& v, std::vector<token_kind>& kinds) {
  const token_id eot = by_key_or_text(v.eot, eot_texts, v, kinds);
  const token_id eom = by_key_or_text(v.eom, eom_texts, v, kinds);
  by_key_or_text(v.fim_pre, fim_pre_texts, v, kinds);
  by_key_or_text(v.fim_suf, fim_suf_texts, v, kinds);
  by_key_or_text(v.fim_mid, fim_mid_texts, v, kinds);
  std::vector<token_id> eog;
  for (const auto& [key, list] : {std::pair{v.fim_pad, fim_pad_texts}, std::pair{v.fim_rep, fim_rep_texts},
                                  std::pair{v.fim_sep, fim_sep_texts}}) {
    if (const token_id id = by_key_or_text(key, list, v, kinds); id >= 0) eog.push_back(id);
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (one_of(v.tokens[i], eog_texts)) {
      kinds[i] = token_kind::control;
      eog.push_back(token_id(i));
    }
  }
  for (const token_id id : {v.eos, eot, eom}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  // gpt-oss / solar-open: <|end|> ends a message, not the generation, when <|return|> and
  // <|call|> (or <|calls|> and <|flush|>) exist; it becomes user-defined. Gemma 4 / PLaMo: a
  // </s> beside <|tool_response>/<|plamo:eos|> is a normal token.
  auto eog_with = [&](texts list) -> token_id {
    for (const token_id id : eog) {
      if (one_of(v.tokens[id], list)) return id;
    }
    return -1;
  };
  auto drop = [&](token_id id, token_kind k) {
    eog.erase(std::find(eog.begin(), eog.end(), id));
    kinds[id] = k;
  };
  const token_id end = eog_with({"<|end|>"});
  const bool call = eog_with({"<|call|>", "<|calls|>"}) >= 0;
  if (end >= 0 && call && (eog_with({"<|return|>"}) >= 0 || eog_with({"<|flush|>"}) >= 0)) {
    drop(end, token_kind::user_defined);
  }
  const token_id s = eog_with({"</s>"});
  if (s >= 0 && eog_with({"<|tool_response>", "<|plamo:eos|>"}) >= 0) drop(s, token_kind::normal);
  return eog;
}

} // namespace conveyor::model
