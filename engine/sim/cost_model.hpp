// Pure. How long the simulated executor takes for one step: a fixed cost (weights streamed
// once per step, launch overhead), a cost per computed token (the GEMMs), and a cost per
// context token each computed token attends to (attention reads the KV cache).
//
//   step_ms = fixed_ms + per_token_ms * num_tokens + per_context_token_us / 1000 * context
//   context = sum over seqs of sum over its new tokens of (position + 1)
//
// All parameters live here so refitting them to measured step times is a one-line change.
#pragma once

#include <optional>
#include <string>

#include "engine/step.hpp"

namespace conveyor::sim {

struct cost_model {
  // Fitted (least squares on relative error, scripts/fit_cost_model.py) to `conveyor step-bench` on
  // the CPU executor with SmolLM2-135M Q4_1, 2-core VM, commit 2065088 (AVX2 attention): decode
  // at batch 1/8/32/128 (context 128), batch 8 at context 1024, one 512-token prefill; the mean
  // of two runs (10.0/1.74/2.23 and 11.8/1.78/1.52), RMS error 18-20%. docs/benchmarks.md,
  // "Simulation", has the table. Refit with the script after executor changes.
  /// Cost of a step regardless of its size. Unit: ms. >= 0.
  double fixed_ms = 10.9;
  /// Cost of each token computed in the step. Unit: ms. >= 0.
  double per_token_ms = 1.76;
  /// Cost of each (computed token, context token) pair of attention. Unit: microseconds. >= 0.
  double per_context_token_us = 1.87;

  /// The simulated duration of `plan`, in seconds.
  double step_s(const step_plan& plan) const;
  /// Returns "" when every parameter is finite and >= 0, else a message naming the field.
  std::string validate() const;
};

/// Named parameter sets for `conveyor sim --cost-model`:
///   "cpu"           the defaults above, fitted to the CPU executor (SmolLM2-135M, 2 cores);
///   "h100-llama8b"  a roofline estimate, NOT a measurement, of Llama-3-8B in bf16 on one H100
///                   SXM (3.35 TB/s HBM3, 989 dense bf16 TFLOP/s): fixed = 16.06 GB of weights
///                   read once per step = 4.8 ms (vLLM reports ~5 ms decode steps for this pair,
///                   reference/peers.md); per token = 16.06 GFLOP at 60% of peak = 0.027 ms;
///                   per context token = its 128 KiB of bf16 K and V read once = 0.039 us.
/// nullopt for an unknown name.
std::optional<cost_model> cost_model_preset(const std::string& name);
/// "cpu, h100-llama8b": the names cost_model_preset knows.
const char* cost_model_preset_names();

} // namespace conveyor::sim
