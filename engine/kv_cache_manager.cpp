#include "engine/kv_cache_manager.hpp"

#include <algorithm>

#include "engine/check.hpp"

namespace conveyor {

namespace {

uint64_t mix64(uint64_t x) {
  // splitmix64's finaliser: a cheap, well-distributed 64-bit mix.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

const std::vector<block_id> no_blocks;

} // namespace

uint64_t prefix_block_hash(uint64_t parent, std::span<const token_id> tokens) {
  uint64_t h = mix64(parent ^ (tokens.size() * 0x9e3779b97f4a7c15ULL));
  for (token_id t : tokens) h = mix64(h ^ static_cast<uint32_t>(t));
  return h;
}

kv_cache_manager::kv_cache_manager(int32_t num_blocks, int32_t block_size,
                                   bool enable_prefix_caching)
    : pool_(num_blocks, block_size), prefix_caching_(enable_prefix_caching) {}

prefix_hit kv_cache_manager::find_cached_prefix(std::span<const token_id> tokens) const {
  prefix_hit hit;
  if (!prefix_caching_ || tokens.empty()) return hit;
  const int32_t bs = block_size();
  // NOTE: full blocks within tokens[0 .. len-2] only; the last token must be computed.
  const size_t max_blocks = (tokens.size() - 1) / bs;
  uint64_t parent = prefix_chain_seed;
  for (size_t i = 0; i < max_blocks; ++i) {
    auto block_tokens = tokens.subspan(i * bs, bs);
    const uint64_t h = prefix_block_hash(parent, block_tokens);
    const block_id b = pool_.find_cached(h, block_tokens);
    if (b < 0) break;
    hit.blocks.push_back(b);
    hit.hashes.push_back(h);
    parent = h;
  }
  hit.num_tokens = static_cast<int32_t>(hit.blocks.size()) * bs;
  return hit;
}

bool kv_cache_manager::allocate_slots(seq_id seq, int32_t num_tokens, const prefix_hit* hit,
                                      int32_t num_reserved) {
  auto it = seqs_.find(seq);
  const bool is_new = it == seqs_.end();
  const size_t num_hit = is_new && hit ? hit->blocks.size() : 0;
  const size_t have = (is_new ? 0 : it->second.table.size()) + num_hit;
  const size_t want = (static_cast<size_t>(num_tokens) + block_size() - 1) / block_size();
  const int32_t num_new = want > have ? static_cast<int32_t>(want - have) : 0;
  int32_t num_revived = 0;
  for (size_t i = 0; i < num_hit; ++i)
    if (pool_.ref_count(hit->blocks[i]) == 0) ++num_revived;
  if (int64_t{num_new} + num_revived + num_reserved > pool_.num_free()) return false;
  if (num_new == 0 && !is_new) return true;

  if (is_new) {
    it = seqs_.emplace(seq, seq_blocks{}).first;
    for (size_t i = 0; i < num_hit; ++i) {
      pool_.touch(hit->blocks[i]);
      it->second.table.push_back(hit->blocks[i]);
      it->second.hashes.push_back(hit->hashes[i]);
    }
    num_table_blocks_ += static_cast<int64_t>(num_hit);
  }
  if (num_new > 0) {
    auto fresh = pool_.allocate(num_new);
    CONVEYOR_ASSERT(fresh.has_value(), "free count checked above");
    it->second.table.insert(it->second.table.end(), fresh->begin(), fresh->end());
    num_table_blocks_ += num_new;
  }
  return true;
}

void kv_cache_manager::cache_blocks(seq_id seq, std::span<const token_id> tokens,
                                    int32_t num_computed) {
  if (!prefix_caching_) return;
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  seq_blocks& s = it->second;
  const int32_t bs = block_size();
  const size_t num_full = static_cast<size_t>(num_computed) / bs;
  CONVEYOR_ASSERT(num_full <= s.table.size(), "computed tokens beyond the block table");
  for (size_t i = s.hashes.size(); i < num_full; ++i) {
    const uint64_t parent = i == 0 ? prefix_chain_seed : s.hashes[i - 1];
    auto block_tokens = tokens.subspan(i * bs, bs);
    const uint64_t h = prefix_block_hash(parent, block_tokens);
    pool_.cache(s.table[i], h, block_tokens);
    s.hashes.push_back(h);
  }
}

void kv_cache_manager::shrink(seq_id seq, int32_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  seq_blocks& s = it->second;
  const size_t keep = std::max((static_cast<size_t>(std::max(num_tokens, 0)) + block_size() - 1) / block_size(), s.hashes.size());
  if (keep >= s.table.size()) return;
  pool_.release(std::span<const block_id>(s.table).subspan(keep));
  num_table_blocks_ -= static_cast<int64_t>(s.table.size() - keep);
  s.table.resize(keep);
}

void kv_cache_manager::free(seq_id seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  pool_.release(it->second.table);
  num_table_blocks_ -= static_cast<int64_t>(it->second.table.size());
  seqs_.erase(it);
}

const std::vector<block_id>& kv_cache_manager::block_table(seq_id seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? no_blocks : it->second.table;
}

std::string kv_cache_manager::check_invariants() const {
  std::vector<int32_t> refs(pool_.num_blocks(), 0);
  int64_t total = 0;
  // last_seen[b] = 1 + index of the last table that held b, to find a block twice in one table.
  std::vector<size_t> last_seen(pool_.num_blocks(), 0);
  size_t table_index = 0;
  for (const auto& [id, s] : seqs_) {
    ++table_index;
    for (block_id b : s.table) {
      if (b < 0 || b >= pool_.num_blocks())
        return "seq " + std::to_string(id) + " holds out-of-range block " + std::to_string(b);
      if (last_seen[b] == table_index)
        return "seq " + std::to_string(id) + " holds block " + std::to_string(b) + " twice";
      last_seen[b] = table_index;
      ++refs[b];
    }
    if (s.hashes.size() > s.table.size())
      return "seq " + std::to_string(id) + " has more hashes than blocks";
    total += static_cast<int64_t>(s.table.size());
  }
  if (total != num_table_blocks_) return "num_table_blocks is out of step with the tables";
  return pool_.check_invariants(refs);
}

} // namespace conveyor
