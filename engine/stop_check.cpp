#include "engine/stop_check.hpp"

#include <algorithm>

namespace conveyor {

std::optional<finish_reason> check_stop(const sequence& seq, int32_t max_model_len) {
  const stop_params& stop = seq.req.stop;
  const int32_t num_output = seq.num_output_tokens();
  if (num_output >= 1 && num_output >= stop.min_tokens) {
    const token_id last = seq.tokens.back();
    const auto contains = [last](const std::vector<token_id>& ids) {
      return std::find(ids.begin(), ids.end(), last) != ids.end();
    };
    if (!stop.ignore_eos && contains(stop.eos_token_ids)) return finish_reason::stop;
    if (contains(stop.stop_token_ids)) return finish_reason::stop;
  }
  if (num_output >= stop.max_tokens || seq.num_tokens() >= max_model_len)
    return finish_reason::length;
  return std::nullopt;
}

} // namespace conveyor
