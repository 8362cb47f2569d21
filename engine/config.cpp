#include "engine/config.hpp"

#include <algorithm>

#include "engine/enum_names.hpp"

#include <cmath>

namespace conveyor {

namespace {

constexpr auto policy_names =
    make_enum_names<scheduling_policy>({{scheduling_policy::fcfs, "fcfs"}, {scheduling_policy::priority, "priority"}});
constexpr auto batching_names =
    make_enum_names<batching_mode>({{batching_mode::continuous, "continuous"}, {batching_mode::static_batch, "static"}});

} // namespace

const char* to_string(scheduling_policy policy) { return policy_names.name(policy); }
const char* to_string(batching_mode mode) { return batching_names.name(mode); }

std::optional<scheduling_policy> parse_scheduling_policy(const std::string& text) { return policy_names.parse(text); }
std::optional<batching_mode> parse_batching_mode(const std::string& text) { return batching_names.parse(text); }

std::string scheduler_config::validate() const {
  if (max_num_seqs < 1)
    return "max_num_seqs is " + std::to_string(max_num_seqs) + "; set it to 1 or more";
  if (max_num_batched_tokens < 1)
    return "max_num_batched_tokens is " + std::to_string(max_num_batched_tokens) +
           "; set it to 1 or more";
  if (max_model_len < 1)
    return "max_model_len is " + std::to_string(max_model_len) + "; set it to 1 or more";
  if (max_num_queued_reqs && *max_num_queued_reqs < 1)
    return "max_num_queued_reqs is " + std::to_string(*max_num_queued_reqs) +
           "; set it to 1 or more, or leave it unset for an unbounded queue";
  if (max_num_queued_tokens && *max_num_queued_tokens < 1)
    return "max_num_queued_tokens is " + std::to_string(*max_num_queued_tokens) +
           "; set it to 1 or more, or leave it unset for an unbounded queue";
  if (speculative.enabled()) {
    if (auto e = speculative.validate(); !e.empty()) return e;
    if (speculative.method == spec_method::draft_model && !speculative.draft)
      return "speculative method draft_model: the draft model '" + speculative.model + "' is not loaded";
  }
  return {};
}

std::string cache_config::validate() const {
  if (block_size < 1 || block_size > 1024)
    return "block_size is " + std::to_string(block_size) + "; set it in [1, 1024] (16 is usual)";
  if (!std::isfinite(kv_watermark) || kv_watermark < 0.0 || kv_watermark >= 1.0)
    return "kv_watermark is " + std::to_string(kv_watermark) + "; set it in [0, 1) (0 = off)";
  return {};
}

std::string validate_engine_config(const scheduler_config& sched, const cache_config& cache,
                                   int32_t num_kv_blocks) {
  if (auto e = sched.validate(); !e.empty()) return e;
  if (auto e = cache.validate(); !e.empty()) return e;
  if (num_kv_blocks < 1)
    return "num_kv_blocks is " + std::to_string(num_kv_blocks) +
           "; the KV pool needs at least one block (raise kv_cache_bytes)";
  const int64_t capacity = int64_t{num_kv_blocks} * cache.block_size;
  if (sched.max_model_len > capacity)
    return "max_model_len (" + std::to_string(sched.max_model_len) +
           ") is larger than the KV pool holds (" + std::to_string(num_kv_blocks) + " blocks x " +
           std::to_string(cache.block_size) + " = " + std::to_string(capacity) +
           " tokens); lower max_model_len or give the pool more blocks";
  return {};
}

int32_t default_max_model_len(int32_t model_context, int32_t pool_tokens) {
  const int32_t share = pool_tokens / min_seqs_in_pool;
  return std::max<int32_t>(1, std::min(model_context, share));
}

kv_auto_size auto_kv_cache_bytes(int64_t bytes_per_token, int32_t max_len, int64_t machine_bytes) {
  const int64_t want = int64_t{min_seqs_in_pool} * std::max(max_len, 1) * bytes_per_token;
  const auto cap = static_cast<int64_t>(kv_auto_memory_fraction * static_cast<double>(machine_bytes));
  const int64_t floor = kv_auto_min_tokens * bytes_per_token;
  const std::string seqs = std::to_string(min_seqs_in_pool) + " sequences of " + std::to_string(max_len) + " tokens";
  if (machine_bytes > 0 && want > cap) {
    if (cap < floor) return {floor, "the minimum of " + std::to_string(kv_auto_min_tokens) + " tokens"};
    return {cap, std::to_string(static_cast<int>(kv_auto_memory_fraction * 100)) + "% of this machine's " +
                     std::to_string(machine_bytes >> 20) + " MiB (" + seqs + " would take " + std::to_string(want >> 20) + " MiB)"};
  }
  if (want < floor) return {floor, "the minimum of " + std::to_string(kv_auto_min_tokens) + " tokens"};
  return {want, seqs};
}

} // namespace conveyor
