// Pure. The logit changes a job's sampling parameters ask for (logit_bias and the presence,
// frequency and repetition penalties), as a short list the scheduler hands the executor with
// each sampled row. The engine owns the formula; the CPU sampler (and the CUDA executor, which
// draws such rows on the host) apply the list. For a token t of the vocabulary:
//
//   y = x[t] + bias[t]                                  (logit_bias; 0 when t is not named)
//   y = y > 0 ? y / r : y * r    if t is in the prompt or the output (r = repetition_penalty)
//   y = y - frequency_penalty * count[t] - presence_penalty * (count[t] > 0)
//
// count[t]: how often t is in the output so far. This is vLLM's order (logits processors, then
// apply_penalties: repetition first, then frequency and presence). A token the list does not
// name keeps its logit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.hpp"
#include "engine/types.hpp"

namespace conveyor {

/// One named token's change: see the formula above.
struct logit_edit {
  token_id token = 0;
  /// logit_bias of the token (0 when it has none).
  float bias = 0.0f;
  /// How often the token is in the output so far.
  int32_t count = 0;
  /// The token is in the prompt or the output (repetition_penalty applies).
  bool repeated = false;
};

/// The logit of token `e.token` after the edit, given its raw logit `x`.
inline float edited_logit(float x, const logit_edit& e, const sampling_params& p) {
  float y = x + e.bias;
  const float r = p.repetition_penalty;
  if (e.repeated && r != 1.0f) y = y > 0.0f ? y / r : y * r;
  if (e.count > 0) {
    y -= p.frequency_penalty * static_cast<float>(e.count);
    y -= p.presence_penalty;
  }
  return y;
}

/// The edits for a sequence whose prompt and output so far are given, one per named token, in
/// ascending token order (empty when `p.edits_logits()` is false). `out` is reused.
void make_logit_edits(const sampling_params& p, std::span<const token_id> prompt, std::span<const token_id> output,
                      std::vector<logit_edit>& out);

/// `edits` (make_logit_edits' for a prompt and an output) brought up to date with the output's
/// next tokens `more`, in O(edits) per token: the scheduler keeps each sequence's list this way
/// instead of rebuilding it from the whole sequence every step. Same result as rebuilding.
void extend_logit_edits(const sampling_params& p, std::span<const token_id> more, std::vector<logit_edit>& edits);

/// Applies `edits` to a row of logits in place (ids past its end are skipped).
void apply_logit_edits(std::span<float> logits, std::span<const logit_edit> edits, const sampling_params& p);

} // namespace conveyor
