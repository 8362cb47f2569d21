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
  if (!std::isfinite(presence_penalty) || presence_penalty < -2.0f || presence_penalty > 2.0f)
    return "presence_penalty must be in [-2, 2] (0 = off)";
  if (!std::isfinite(frequency_penalty) || frequency_penalty < -2.0f || frequency_penalty > 2.0f)
    return "frequency_penalty must be in [-2, 2] (0 = off)";
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f)
    return "repetition_penalty must be a finite number > 0 (1 = off)";
  if (logit_bias.size() > max_logit_bias)
    return "logit_bias names " + std::to_string(logit_bias.size()) + " tokens; at most " + std::to_string(max_logit_bias) +
           " are allowed";
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto [token, bias] = logit_bias[i];
    if (token < 0) return "logit_bias: token id " + std::to_string(token) + " must be >= 0";
    if (i > 0 && token <= logit_bias[i - 1].first) return "logit_bias: token ids must be distinct and in ascending order";
    if (!std::isfinite(bias) || bias < -100.0f || bias > 100.0f)
      return "logit_bias: the bias of token " + std::to_string(token) + " must be in [-100, 100]";
  }
  return {};
}

} // namespace conveyor
