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

} // namespace conveyor::sim
