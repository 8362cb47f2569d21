#include "engine/logit_edits.hpp"

#include <algorithm>

namespace conveyor {

void make_logit_edits(const sampling_params& p, std::span<const token_id> prompt, std::span<const token_id> output,
                      std::vector<logit_edit>& out) {
  out.clear();
  if (!p.edits_logits()) return;
  // One raw entry per occurrence, then sorted by token and merged: O(n log n) in the sequence's
  // length, which is small beside the step's matrix products.
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counted = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  struct raw {
    token_id token;
    int32_t in_output;  // 1 for an output occurrence
    bool in_sequence;
    float bias;
  };
  std::vector<raw> all;
  all.reserve(p.logit_bias.size() + (repetition ? prompt.size() : 0) + (repetition || counted ? output.size() : 0));
  for (const auto& [t, b] : p.logit_bias) all.push_back({t, 0, false, b});
  if (repetition)
    for (token_id t : prompt) all.push_back({t, 0, true, 0.0f});
  if (repetition || counted)
    for (token_id t : output) all.push_back({t, 1, true, 0.0f});
  std::sort(all.begin(), all.end(), [](const raw& a, const raw& b) { return a.token < b.token; });
  for (size_t i = 0; i < all.size();) {
    logit_edit e;
    e.token = all[i].token;
    for (; i < all.size() && all[i].token == e.token; ++i) {
      e.count += all[i].in_output;
      e.repeated = e.repeated || (repetition && all[i].in_sequence);
      e.bias += all[i].bias;
    }
    out.push_back(e);
  }
}

void extend_logit_edits(const sampling_params& p, std::span<const token_id> more, std::vector<logit_edit>& edits) {
  const bool repetition = p.repetition_penalty != 1.0f;
  if (!repetition && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;  // output tokens change nothing
  for (token_id t : more) {
    auto at = std::lower_bound(edits.begin(), edits.end(), t, [](const logit_edit& e, token_id x) { return e.token < x; });
    if (at == edits.end() || at->token != t) at = edits.insert(at, logit_edit{t, 0.0f, 0, false});
    at->count += 1;
    at->repeated = at->repeated || repetition;
  }
}

void apply_logit_edits(std::span<float> logits, std::span<const logit_edit> edits, const sampling_params& p) {
  for (const logit_edit& e : edits)
    if (e.token >= 0 && static_cast<size_t>(e.token) < logits.size())
      logits[static_cast<size_t>(e.token)] = edited_logit(logits[static_cast<size_t>(e.token)], e, p);
}

} // namespace conveyor
