#include "engine/ngram_index.hpp"

#include <algorithm>

namespace conveyor {

uint64_t ngram_index::key_at(std::span<const token_id> tokens, int64_t end) const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int64_t i = end - key_n_; i < end; ++i) {
    h ^= static_cast<uint32_t>(tokens[static_cast<size_t>(i)]);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return h;
}

void ngram_index::update(std::span<const token_id> tokens, int32_t key_n) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (key_n != key_n_ || len < indexed_ || (indexed_ > 0 && tokens[static_cast<size_t>(indexed_ - 1)] != last_)) {
    key_n_ = key_n;
    indexed_ = 0;
    latest_.clear();
    prev_.clear();
  }
  if (len == indexed_) return;
  prev_.resize(static_cast<size_t>(len) + 1, -1);
  for (int64_t end = std::max<int64_t>(indexed_ + 1, key_n_); end <= len; ++end) {
    auto [it, fresh] = latest_.try_emplace(key_at(tokens, end), static_cast<int32_t>(end));
    prev_[static_cast<size_t>(end)] = fresh ? -1 : it->second;
    it->second = static_cast<int32_t>(end);
  }
  indexed_ = len;
  last_ = tokens[static_cast<size_t>(len - 1)];
}

} // namespace conveyor
