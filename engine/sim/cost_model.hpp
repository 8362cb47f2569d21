// Pure. How long the simulated executor takes for one step: a fixed cost (weights streamed
// once per step, launch overhead), a cost per computed token (the GEMMs), and a cost per
// context token each computed token attends to (attention reads the KV cache).
//
//   step_ms = fixed_ms + per_token_ms * num_tokens + per_context_token_us / 1000 * context
//   context = sum over seqs of sum over its new tokens of (position + 1)
//
// All parameters live here so refitting them to measured step times is a one-line change.
#pragma once

#include "engine/step.hpp"

namespace conveyor::sim {

struct cost_model {
  // Fitted (least squares on relative error) to `conveyor step-bench` on the CPU executor with
  // SmolLM2-135M Q4_1, quiet 2-core VM, commit 4acc995: decode at batch 1/8/32/128 (context
  // 128), batch 8 at context 1024, one 512-token prefill. RMS error 20%, worst +34% (prefill);
  // docs/benchmarks.md, "Simulation", has the table and the commands. Refit here.
  /// Cost of a step regardless of its size. Unit: ms. >= 0.
  double fixed_ms = 8.6;
  /// Cost of each token computed in the step. Unit: ms. >= 0.
  double per_token_ms = 2.55;
  /// Cost of each (computed token, context token) pair of attention. Unit: microseconds. >= 0.
  double per_context_token_us = 6.2;

  /// The simulated duration of `plan`, in seconds.
  double step_s(const step_plan& plan) const;
  /// Returns "" when every parameter is finite and >= 0, else a message naming the field.
  std::string validate() const;
};

} // namespace conveyor::sim
