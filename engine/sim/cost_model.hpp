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
  // PROVISIONAL: a rough linear fit to `conveyor step-bench` on the CPU executor with
  // SmolLM2-135M Q4_1 on the 2-core VM (docs/benchmarks.md, "Simulation"). Refit here.
  /// Cost of a step regardless of its size. Unit: ms. >= 0.
  double fixed_ms = 250.0;
  /// Cost of each token computed in the step. Unit: ms. >= 0.
  double per_token_ms = 7.5;
  /// Cost of each (computed token, context token) pair of attention. Unit: microseconds. >= 0.
  double per_context_token_us = 5.0;

  /// The simulated duration of `plan`, in seconds.
  double step_s(const step_plan& plan) const;
  /// Returns "" when every parameter is finite and >= 0, else a message naming the field.
  std::string validate() const;
};

} // namespace conveyor::sim
