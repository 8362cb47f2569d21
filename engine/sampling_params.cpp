#include "engine/sampling_params.hpp"

#include <cmath>

namespace conveyor {

std::string sampling_params::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return "temperature must be a finite number >= 0 (0 = greedy)";
  if (!std::isfinite(top_p) || top_p <= 0.0f || top_p > 1.0f)
    return "top_p must be in (0, 1] (1 = off)";
  if (top_k < 0)
    return "top_k must be >= 0 (0 = off)";
  if (!std::isfinite(min_p) || min_p < 0.0f || min_p > 1.0f)
    return "min_p must be in [0, 1] (0 = off)";
  if (top_logprobs < 0 || top_logprobs > max_top_logprobs)
    return "top_logprobs must be in [0, " + std::to_string(max_top_logprobs) + "]";
  return {};
}

} // namespace conveyor
