// Shared by `conveyor step-bench` (CPU) and `conveyor gpu-bench` (CUDA): synthetic step plans
// of n sequences in disjoint block ranges, and the wall time of one executor step.
#pragma once

#include <chrono>
#include <cstdint>

#include "engine/executor.hpp"

namespace conveyor::tools {

/// `n` greedy sequences, each computing `len` tokens after `computed` cached ones; sequence s
/// owns blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq). Token ids are deterministic.
inline step_plan make_bench_plan(int32_t n, int32_t computed, int32_t len, int32_t blocks_per_seq, int32_t vocab) {
  step_plan p;
  for (int32_t s = 0; s < n; ++s) {
    scheduled_seq q;
    q.id = static_cast<seq_id>(s);
    q.num_computed_tokens = computed;
    for (int32_t i = 0; i < len; ++i) q.tokens.push_back((1000 + 7919 * (s + computed + i)) % vocab);
    for (int32_t b = 0; b < blocks_per_seq; ++b) q.block_table.push_back(s * blocks_per_seq + b);
    q.sample = true;
    q.sampling.temperature = 0.0f;
    p.seqs.push_back(std::move(q));
  }
  return p;
}

/// Milliseconds one `ex.step(p)` takes (the executor returns only after the step is done).
inline double time_step_ms(executor& ex, const step_plan& p) {
  const auto t0 = std::chrono::steady_clock::now();
  ex.step(p);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Milliseconds per step when `n` steps run pipelined, as the server runs them on a GPU: step i+1
/// is submitted before step i is collected, its decode tokens the ones step i is still sampling
/// (k_previous_sample). `plan_of(i)` makes step i; from i = 1 its tokens are replaced.
template <class PlanOf>
double time_pipelined_ms(executor& ex, int32_t n, PlanOf&& plan_of) {
  const auto t0 = std::chrono::steady_clock::now();
  ex.submit(plan_of(0));
  for (int32_t i = 1; i < n; ++i) {
    step_plan p = plan_of(i);
    for (auto& q : p.seqs) q.tokens.assign(q.tokens.size(), k_previous_sample);
    ex.submit(p);
    ex.collect();
  }
  ex.collect();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n;
}

} // namespace conveyor::tools
