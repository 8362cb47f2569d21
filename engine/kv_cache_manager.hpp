// Pure. Per-sequence block tables over one block_pool, plus the prefix cache: full blocks are
// keyed by a hash chain (parent hash, token ids of the block), and a new prompt starts from the
// longest cached run of its full blocks. Owns block ids, never KV memory.
//
//   prompt of 10 tokens, block_size 4:   [t0 t1 t2 t3][t4 t5 t6 t7][t8 t9 .. ..]
//   hash chain:                           h0=H(seed,t0..3)  h1=H(h0,t4..7)   (partial: none)
//   a hit may cover at most the full blocks of tokens[0 .. len-2]: the last token is always
//   computed, because its logits give the first output token.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.hpp"
#include "engine/types.hpp"

namespace conveyor {

/// The hash of one full block in the chain: parent's hash (or the chain seed for block 0) and
/// the block's token ids.
uint64_t prefix_block_hash(uint64_t parent, std::span<const token_id> tokens);
/// The parent hash of a sequence's first block.
inline constexpr uint64_t prefix_chain_seed = 0x9e3779b97f4a7c15ULL;

/// A run of cached blocks that begins a prompt.
struct prefix_hit {
  std::vector<block_id> blocks;
  /// The chain hash of each block in `blocks`.
  std::vector<uint64_t> hashes;
  /// Tokens the hit covers: blocks.size() * block_size.
  int32_t num_tokens = 0;
};

class kv_cache_manager {
public:
  kv_cache_manager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  /// Blocks an allocation may take (unreferenced, including evictable cached ones).
  int32_t num_free_blocks() const { return pool_.num_free(); }
  int32_t num_used_blocks() const { return pool_.num_blocks() - pool_.num_free(); }
  /// Sum of all block-table lengths (a block shared by two tables counts twice).
  int64_t num_table_blocks() const { return num_table_blocks_; }
  bool prefix_caching() const { return prefix_caching_; }

  /// The longest run of cached full blocks that begins `tokens`, never covering its last token.
  /// Changes nothing. Empty when prefix caching is off.
  prefix_hit find_cached_prefix(std::span<const token_id> tokens) const;

  /// Makes `seq`'s block table cover `num_tokens` positions, creating the table when absent; a
  /// new table starts from `hit` (a reference is taken on each of its blocks). Succeeds only if
  /// the new blocks, the free blocks the hit revives and `num_reserved` more all fit among the
  /// free blocks; otherwise returns false and changes nothing.
  bool allocate_slots(seq_id seq, int32_t num_tokens, const prefix_hit* hit = nullptr,
                      int32_t num_reserved = 0);

  /// Registers in the prefix cache every full block of `seq` within its first `num_computed`
  /// tokens (`tokens` are all of the sequence's known tokens). No-op when caching is off.
  void cache_blocks(seq_id seq, std::span<const token_id> tokens, int32_t num_computed);

  /// Releases the blocks of `seq`'s table past the first ones covering `num_tokens` positions
  /// (slots of rejected drafts), tail first; never a block registered in the prefix cache.
  void shrink(seq_id seq, int32_t num_tokens);

  /// Releases `seq`'s table, tail block first, and forgets it. No-op for an unknown seq.
  void free(seq_id seq);

  /// `seq`'s blocks in position order (empty when it has none).
  const std::vector<block_id>& block_table(seq_id seq) const;

  const block_pool& pool() const { return pool_; }

  /// Every block is free xor owned, ref counts equal table references, no block appears twice
  /// in one table, nothing leaks. Returns "" or the first violation.
  std::string check_invariants() const;

private:
  struct seq_blocks {
    std::vector<block_id> table;
    /// Chain hashes of the leading full blocks already registered (or revived from a hit).
    std::vector<uint64_t> hashes;
  };

  block_pool pool_;
  bool prefix_caching_;
  int64_t num_table_blocks_ = 0;
  std::unordered_map<seq_id, seq_blocks> seqs_;
};

} // namespace conveyor
