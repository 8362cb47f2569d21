// Pure. The KV block pool: block ids 0..N-1, a ref count each, one free queue, and the
// prefix-cache registry (hash -> block) for full blocks. Owns ids, not memory.
//
//   free queue, head taken first:   head -> 3 -> 5 -> 6 -> 7 -> 4 -> tail
//                                   (uncached freed) (never used) (cached, LRU)
//   A block with ref_count 0 sits in the queue. If it still carries a hash it is a cache entry
//   that a later prompt may revive (touch) until an allocation pops it and drops the hash.
//   A released block without a hash goes to the head: it holds nothing worth keeping, and its
//   memory is already in use (the CPU pool commits a block's pages when it is first written), so
//   it is taken before a never-used block and the pool's touched memory stays at the most blocks
//   ever held at once (live + cached). A cached block goes to the tail, back to front, so a
//   sequence's tail blocks are evicted before its head blocks, which are the ones other prompts
//   are most likely to share; cached blocks are evicted only when no other block is free.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/types.hpp"

namespace conveyor {

class block_pool {
public:
  block_pool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_count_.size()); }
  int32_t block_size() const { return block_size_; }
  /// Blocks with ref count 0, cached or not: what an allocation may take.
  int32_t num_free() const { return num_free_; }
  /// Blocks that carry a prefix-cache hash (in use or free).
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }

  /// Pops `n` blocks from the head of the free queue, evicting their cache entries, and gives
  /// each ref count 1. Returns nullopt and changes nothing when fewer than `n` are free.
  std::optional<std::vector<block_id>> allocate(int32_t n);
  /// Takes one more reference on `block` (a prefix-cache hit); a free block leaves the queue.
  void touch(block_id block);
  /// Drops one reference from each block, walking `blocks` back to front; a block that reaches
  /// 0 goes to the tail of the free queue and keeps its cache entry until evicted, or, without
  /// one, to the head.
  void release(std::span<const block_id> blocks);

  /// The block cached under `hash` whose tokens equal `tokens`, or -1.
  block_id find_cached(uint64_t hash, std::span<const token_id> tokens) const;
  /// Registers `block` (in use, full, holding `tokens`) under `hash`. Does nothing when the
  /// block is already cached or another block holds that hash (duplicates are tolerated).
  void cache(block_id block, uint64_t hash, std::span<const token_id> tokens);

  int32_t ref_count(block_id block) const { return ref_count_[block]; }
  bool is_cached(block_id block) const { return has_hash_[block] != 0; }
  /// The free queue from head (evicted first) to tail. For tests and diagnostics.
  std::vector<block_id> free_queue() const;

  /// Checks the pool against `expected_refs` (references per block from every block table):
  /// ref counts match, a block is free exactly when its count is 0, the queue holds each free
  /// block once, and the hash registry and the blocks agree. Returns "" or the first violation.
  std::string check_invariants(const std::vector<int32_t>& expected_refs) const;

private:
  void unlink(block_id block);
  void insert_before(block_id block, int32_t at);
  void push_back(block_id block);
  void push_front(block_id block);
  void evict(block_id block);

  int32_t block_size_;
  int32_t num_free_ = 0;
  std::vector<int32_t> ref_count_;
  // Intrusive doubly-linked free queue; index num_blocks is the sentinel.
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
  std::vector<uint8_t> in_queue_;
  // Prefix-cache entries: per block its hash and a copy of its tokens (checked on every hit).
  std::vector<uint8_t> has_hash_;
  std::vector<uint64_t> hash_;
  std::vector<token_id> tokens_;
  std::unordered_map<uint64_t, block_id> by_hash_;
};

} // namespace conveyor
