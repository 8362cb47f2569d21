// Where the short n-grams of a growing token sequence occur, for prompt lookup
// (engine/speculation.hpp's propose_ngram): each position that ends an occurrence of a key (the
// key_n tokens before it) is chained to the previous one with the same key, as an LZ77
// compressor's hash chains. A lookup walks the chain of the sequence's own last key_n tokens,
// latest first, so it touches only the positions that can match, not the whole sequence.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/types.hpp"

namespace conveyor {

class ngram_index {
 public:
  /// Brings the index up to `tokens` for keys of key_n tokens: indexes the new tokens when
  /// `tokens` extends what it indexed (a sequence's tokens are only ever appended), starts over
  /// when the key length changed, `tokens` is shorter, or its token at the last indexed position
  /// differs (another sequence; a rewrite before that position would go unnoticed).
  void update(std::span<const token_id> tokens, int32_t key_n);
  /// The ends (the position after the last token) of the earlier occurrences of the key that
  /// ends `tokens` (update()d), latest first: calls f(end) for each, while f returns true.
  /// Keys are hashed: an end may hold another key of the same hash, so callers compare tokens.
  template <class F> void walk(std::span<const token_id> tokens, F&& f) const {
    const auto len = static_cast<int64_t>(tokens.size());
    if (len < key_n_ || len > indexed_) return;
    for (int32_t e = prev_[static_cast<size_t>(len)]; e >= 0; e = prev_[static_cast<size_t>(e)])
      if (!f(static_cast<int64_t>(e))) return;
  }

 private:
  uint64_t key_at(std::span<const token_id> tokens, int64_t end) const;
  int32_t key_n_ = 0;
  int64_t indexed_ = 0;              // tokens[0, indexed_) are in
  token_id last_ = 0;                // tokens[indexed_ - 1], to notice different tokens
  std::unordered_map<uint64_t, int32_t> latest_;  // key -> the latest end holding it
  std::vector<int32_t> prev_;        // end -> the previous end with the same key (-1: none)
};

} // namespace conveyor
