// Byte-level BPE merging (model-format.md §5.4): the token-text -> id map, merge ranks keyed by
// (left id, right id), and the per-word merge loop. Internal to model/; built once per tokenizer
// and read-only afterwards, so encode_word may run on several threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/types.hpp"

namespace conveyor::model {

/// Hash that lets unordered_map<std::string, ...> be searched with a string_view.
struct string_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class bpe_model {
public:
  /// Indexes `tokens` (later duplicates win, as in llama.cpp) and parses `merges` ("left right",
  /// split at the first space after position 0; the first occurrence of a pair keeps its rank).
  /// Throws tokenizer_error for a malformed merge or one whose left, right or merged text is not
  /// a token.
  bpe_model(const std::vector<std::string>& tokens, const std::vector<std::string>& merges);

  /// Id of the token whose text is exactly `text`, or -1.
  token_id find(std::string_view text) const;

  /// Appends the ids of one pre-token, given as raw bytes (byte-encoding happens here).
  /// ignore_merges: a word that is itself a token is emitted whole. A final symbol that is not a
  /// token falls back to the ids of its single bytes, skipping those that are missing.
  void encode_word(std::string_view raw, bool ignore_merges, std::vector<token_id>& out) const;

private:
  struct merge_rule {
    int32_t rank;
    token_id merged;
  };
  static uint64_t pair_key(token_id l, token_id r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }

  std::unordered_map<std::string, token_id, string_hash, std::equal_to<>> token_to_id_;
  std::unordered_map<uint64_t, merge_rule> merges_;
  std::array<token_id, 256> byte_ids_{};  ///< id of the byte-encoded character of each byte, or -1
};

} // namespace conveyor::model
