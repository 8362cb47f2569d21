// cpu_executor::attention_split: one or a few long runs of rows on more threads than their kv
// heads make items (in practice a lone decode at 2048 positions or more: on 2 threads its 3 kv
// heads leave one thread idle for one item in three). Their attention goes in two rounds of items:
// the scores of ranges of keys (a run, a kv head, a range of whole blocks: over every thread),
// then softmax and P · V (a run, a kv head), paged_kv::score_keys / attend_values, bit for bit
// paged_kv::attend. P · V stays whole per kv head: split by 32 dimensions (each item its own
// softmax) it made 2-thread decodes at 1000-4000 positions 2-10% slower, not faster
// (docs/benchmarks.md), where each item reads every other 64-byte line of the values.
#include "model/cpu/cpu_executor.hpp"

#include <algorithm>

namespace conveyor::model {

bool cpu_executor::attention_split(int32_t l, int32_t width, float scale, bool by_kv_head) {
  const int64_t threads = pool_.size(), n_runs = static_cast<int64_t>(runs_.size());
  const int32_t n_kv = cfg_.n_head_kv, group = cfg_.n_head / n_kv, hd = cfg_.head_dim, bs = info_.block_size;
  if (!by_kv_head || split_keys_ <= 0 || threads < 2 || n_runs * n_kv >= 2 * threads || group > kv_->split_max_heads()) return false;
  int32_t longest = 0;
  for (const auto& [t, n] : runs_) longest = std::max(longest, pos_[t] + n);
  if (longest < split_keys_) return false;
  // Ranges of keys: about two items a thread in all, whole blocks each.
  const int64_t pieces = (2 * threads + n_runs * n_kv - 1) / (n_runs * n_kv);
  const int32_t keys = static_cast<int32_t>((longest + pieces - 1) / pieces + bs - 1) / bs * bs;
  const int32_t ranges = (longest + keys - 1) / keys;
  split_at_.clear();  // where each run's scores start: kv head h's rows follow at h * rows * group * stride
  int64_t total = 0;
  for (const auto& [t, n] : runs_) {
    split_at_.push_back(total);
    total += int64_t{n_kv} * n * group * kv_->score_stride(pos_[t] + n);
  }
  split_scores_.resize(static_cast<size_t>(total));
  const int32_t nq = cfg_.n_head * hd;
  const auto scores_of = [&](int64_t ri, int32_t h) {
    const auto [t, n] = runs_[static_cast<size_t>(ri)];
    return split_scores_.data() + split_at_[static_cast<size_t>(ri)] + int64_t{h} * n * group * kv_->score_stride(pos_[t] + n);
  };
  pool_.parallel_for(n_runs * n_kv * ranges, [&](int64_t item, int32_t) {
    const int64_t ri = item / (n_kv * ranges);
    const auto h = static_cast<int32_t>(item / ranges % n_kv), j0 = static_cast<int32_t>(item % ranges) * keys;
    const auto [t, n] = runs_[static_cast<size_t>(ri)];
    if (j0 >= pos_[t] + n) return;
    kv_->score_keys(l, table_[t], pos_[t], n, h, group, &qkv_[static_cast<size_t>(t) * width + h * group * hd], width, scale,
                    match_llama_cpp_, j0, std::min(pos_[t] + n, j0 + keys), scores_of(ri, h), kv_->score_stride(pos_[t] + n));
  });
  pool_.parallel_for(n_runs * n_kv, [&](int64_t item, int32_t) {
    const int64_t ri = item / n_kv;
    const auto h = static_cast<int32_t>(item % n_kv);
    const auto [t, n] = runs_[static_cast<size_t>(ri)];
    kv_->attend_values(l, table_[t], pos_[t], n, h, group, scores_of(ri, h), kv_->score_stride(pos_[t] + n), match_llama_cpp_,
                       &attn_[static_cast<size_t>(t) * nq + h * group * hd], nq);
  });
  return true;
}

} // namespace conveyor::model
