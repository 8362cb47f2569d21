#include "engine/config.hpp"

#include <algorithm>

#include <cmath>

namespace conveyor {

const char* to_string(scheduling_policy policy) {
  switch (policy) {
    case scheduling_policy::fcfs: return "fcfs";
    case scheduling_policy::priority: return "priority";
  }
  return "?";
}

const char* to_string(batching_mode mode) {
  switch (mode) {
    case batching_mode::continuous: return "continuous";
    case batching_mode::static_batch: return "static";
  }
  return "?";
}

std::optional<scheduling_policy> parse_scheduling_policy(const std::string& text) {
  if (text == "fcfs") return scheduling_policy::fcfs;
  if (text == "priority") return scheduling_policy::priority;
  return std::nullopt;
}

std::optional<batching_mode> parse_batching_mode(const std::string& text) {
  if (text == "continuous") return batching_mode::continuous;
  if (text == "static") return batching_mode::static_batch;
  return std::nullopt;
}

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

} // namespace conveyor
