// SentencePiece (tokenizer.ggml.model = "llama") merging, as llama.cpp's llm_tokenizer_spm does it:
// symbols start as UTF-8 characters, the adjacent pair whose concatenation is the vocabulary
// entry with the highest score merges first, and a final symbol that is not a token falls back
// to byte tokens <0xXX>. Internal to model/; read-only after construction, so encode may run on
// several threads at once. Spaces become U+2581 (▁) before this runs (tokenizer_encode.cpp).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/types.hpp"
#include "model/text/bpe.hpp"  // string_hash

namespace conveyor::model {

class spm_model {
public:
  /// Indexes `tokens` (later duplicates win, as in llama.cpp). `scores` is empty (all 0) or one
  /// per token. `unk` (or -1) stands in for a byte that has no byte token.
  /// Throws tokenizer_error when `scores` has the wrong length.
  spm_model(const std::vector<std::string>& tokens, const std::vector<float>& scores, token_id unk);

  /// Appends the ids of `text` (already with ▁ for spaces). Bytes are grouped into characters
  /// by their lead byte only, as llama.cpp does, so invalid UTF-8 reaches the byte fallback.
  void encode(std::string_view text, std::vector<token_id>& out) const;

private:
  token_id find(std::string_view text) const;

  std::unordered_map<std::string, token_id, string_hash, std::equal_to<>> token_to_id_;
  std::vector<float> scores_;
  /// <0xXX>, else the one-byte token, else unk (-1: the byte is dropped).
  std::array<token_id, 256> byte_ids_{};
};

} // namespace conveyor::model
