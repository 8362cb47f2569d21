// Test support for the executor tests: runs the same step plans through the CPU and the CUDA
// executor (teacher-forced with the CPU's tokens) and compares every sampled row's logits, and
// checks that the token the GPU sampled is the one model::sample_token picks from the GPU's own
// logits with the same parameters, seed and position.
#pragma once

#include <vector>

#include "engine/sampling_params.hpp"
#include "engine/step.hpp"
#include "gpu/cuda_executor.hpp"
#include "model/cpu/cpu_executor.hpp"

namespace conveyor::gpu::testing {

struct lock_seq {
  std::vector<token_id> prompt;
  int32_t chunk = 0;  ///< prompt tokens per step; 0 = all at once
  int32_t start_step = 0;
  int32_t max_new = 6;
  sampling_params sampling;  ///< default: greedy
  std::vector<token_id> out;
  int32_t done = 0;
};

/// Runs `seqs` to completion in both executors (sequence i owns blocks i*blocks_per_seq ..).
/// Returns the largest per-row relative logit error; `rows` counts compared rows.
double lockstep(model::cpu_executor& cpu, cuda_executor& gpu, std::vector<lock_seq> seqs, int32_t blocks_per_seq, int32_t& rows);

/// Deterministic prompt tokens in [3, vocab).
std::vector<token_id> prompt_of(int32_t n, int32_t vocab, int32_t salt);

cuda_executor_options gpu_opts(int32_t block_size, int32_t blocks, bool graphs);
model::cpu_executor_options cpu_opts(int32_t block_size, int32_t blocks);

} // namespace conveyor::gpu::testing
