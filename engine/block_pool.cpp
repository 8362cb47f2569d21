#include "engine/block_pool.hpp"

#include <algorithm>

#include "engine/check.hpp"

namespace conveyor {

block_pool::block_pool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), ref_count_(num_blocks, 0), prev_(num_blocks + 1),
      next_(num_blocks + 1), in_queue_(num_blocks, 0), has_hash_(num_blocks, 0),
      hash_(num_blocks, 0), tokens_(static_cast<size_t>(num_blocks) * block_size, 0) {
  CONVEYOR_ASSERT(num_blocks >= 1 && block_size >= 1, "block_pool needs blocks and block_size");
  const int32_t sentinel = num_blocks;
  prev_[sentinel] = next_[sentinel] = sentinel;
  for (block_id b = 0; b < num_blocks; ++b) push_back(b);
}

void block_pool::unlink(block_id block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  in_queue_[block] = 0;
  --num_free_;
}

void block_pool::insert_before(block_id block, int32_t at) {
  prev_[block] = prev_[at];
  next_[block] = at;
  next_[prev_[at]] = block;
  prev_[at] = block;
  in_queue_[block] = 1;
  ++num_free_;
}

void block_pool::push_back(block_id block) { insert_before(block, num_blocks()); }  // before the sentinel
void block_pool::push_front(block_id block) { insert_before(block, next_[num_blocks()]); }

void block_pool::evict(block_id block) {
  if (!has_hash_[block]) return;
  by_hash_.erase(hash_[block]);
  has_hash_[block] = 0;
}

std::optional<std::vector<block_id>> block_pool::allocate(int32_t n) {
  if (n < 0 || n > num_free_) return std::nullopt;
  std::vector<block_id> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const block_id b = next_[num_blocks()];
    unlink(b);
    evict(b);
    ref_count_[b] = 1;
    out.push_back(b);
  }
  return out;
}

void block_pool::touch(block_id block) {
  if (ref_count_[block] == 0) unlink(block);
  ++ref_count_[block];
}

void block_pool::release(std::span<const block_id> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    CONVEYOR_ASSERT(ref_count_[*it] > 0, "release of a block nobody holds");
    if (--ref_count_[*it] == 0) has_hash_[*it] ? push_back(*it) : push_front(*it);
  }
}

block_id block_pool::find_cached(uint64_t hash, std::span<const token_id> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const token_id* held = tokens_.data() + static_cast<size_t>(it->second) * block_size_;
  if (!std::equal(tokens.begin(), tokens.end(), held)) return -1;
  return it->second;
}

void block_pool::cache(block_id block, uint64_t hash, std::span<const token_id> tokens) {
  CONVEYOR_ASSERT(static_cast<int32_t>(tokens.size()) == block_size_, "only full blocks cache");
  CONVEYOR_ASSERT(ref_count_[block] > 0, "cache() on a free block");
  if (has_hash_[block] || by_hash_.count(hash) != 0) return;
  by_hash_.emplace(hash, block);
  has_hash_[block] = 1;
  hash_[block] = hash;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<size_t>(block) * block_size_);
}

std::vector<block_id> block_pool::free_queue() const {
  std::vector<block_id> out;
  for (int32_t b = next_[num_blocks()]; b != num_blocks(); b = next_[b]) out.push_back(b);
  return out;
}

std::string block_pool::check_invariants(const std::vector<int32_t>& expected_refs) const {
  const int32_t n = num_blocks();
  if (static_cast<int32_t>(expected_refs.size()) != n) return "expected_refs has the wrong size";
  std::vector<uint8_t> seen(n, 0);
  int32_t queued = 0;
  for (int32_t b = next_[n]; b != n; b = next_[b]) {
    if (b < 0 || b > n || seen[b]) return "free queue is corrupt at block " + std::to_string(b);
    if (next_[prev_[b]] != b) return "free queue links broken at block " + std::to_string(b);
    seen[b] = 1;
    if (++queued > n) return "free queue has a cycle";
  }
  if (queued != num_free_)
    return "free queue holds " + std::to_string(queued) + " blocks, num_free says " +
           std::to_string(num_free_);
  for (block_id b = 0; b < n; ++b) {
    const std::string id = "block " + std::to_string(b);
    if (ref_count_[b] != expected_refs[b])
      return id + " has ref count " + std::to_string(ref_count_[b]) + " but " +
             std::to_string(expected_refs[b]) + " table references";
    if ((ref_count_[b] == 0) != (seen[b] != 0) || seen[b] != in_queue_[b])
      return id + " is not free xor owned (ref " + std::to_string(ref_count_[b]) +
             (seen[b] ? ", in free queue)" : ", not in free queue)");
    if (has_hash_[b]) {
      auto it = by_hash_.find(hash_[b]);
      if (it == by_hash_.end() || it->second != b) return id + " has a hash the registry lacks";
    }
  }
  for (const auto& [hash, b] : by_hash_)
    if (b < 0 || b >= n || !has_hash_[b] || hash_[b] != hash)
      return "registry entry points at block " + std::to_string(b) + " which lacks that hash";
  return {};
}

} // namespace conveyor
