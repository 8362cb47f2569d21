#include "engine/sim/cost_model.hpp"

#include <cmath>
#include <string>

namespace conveyor::sim {

double cost_model::step_s(const step_plan& plan) const {
  double tokens = 0.0;
  double context = 0.0;
  for (const scheduled_seq& s : plan.seqs) {
    const double n = static_cast<double>(s.tokens.size());
    const double c = s.num_computed_tokens;
    tokens += n;
    // The i-th new token (0-based) attends to c + i + 1 positions.
    context += n * c + n * (n + 1.0) / 2.0;
  }
  return (fixed_ms + per_token_ms * tokens + per_context_token_us * 1e-3 * context) * 1e-3;
}

std::string cost_model::validate() const {
  const auto bad = [](double v) { return !std::isfinite(v) || v < 0.0; };
  if (bad(fixed_ms)) return "fixed_ms must be a finite number >= 0";
  if (bad(per_token_ms)) return "per_token_ms must be a finite number >= 0";
  if (bad(per_context_token_us)) return "per_context_token_us must be a finite number >= 0";
  return {};
}

std::optional<cost_model> cost_model_preset(const std::string& name) {
  if (name == "cpu") return cost_model{};
  if (name == "h100-llama8b") {
    constexpr double weight_bytes = 16.06e9, hbm_bytes_per_s = 3.35e12;
    constexpr double flops_per_token = 2.0 * 8.03e9, achieved_flops = 0.6 * 989e12;
    constexpr double kv_bytes_per_token = 32.0 * 8 * 128 * 2 * 2;  // layers x kv heads x head dim x (K, V) x bf16
    cost_model m;
    m.fixed_ms = weight_bytes / hbm_bytes_per_s * 1e3;
    m.per_token_ms = flops_per_token / achieved_flops * 1e3;
    m.per_context_token_us = kv_bytes_per_token / hbm_bytes_per_s * 1e6;
    return m;
  }
  return std::nullopt;
}

const char* cost_model_preset_names() { return "cpu, h100-llama8b"; }

} // namespace conveyor::sim
