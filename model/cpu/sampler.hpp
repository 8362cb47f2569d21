// Draws the next token from one row of logits. Pure function of (logits, params, position):
// the uniform draw comes from a counter-based generator keyed by the request's seed and the
// absolute position of the token being sampled, so results never depend on batch composition
// and replay exactly after a preemption.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/logit_edits.hpp"
#include "engine/sampling_params.hpp"
#include "engine/step.hpp"
#include "engine/types.hpp"

namespace conveyor::model {

struct sample_result {
  token_id token = 0;
  /// log-probability of `token` under softmax(raw logits).
  float logprob = 0.0f;
};

/// A uniform number in [0, 1) determined by (seed, position) alone.
double sample_coin(uint64_t seed, int64_t position);

/// Reusable buffers so sampling allocates nothing per call.
struct sampler_scratch {
  std::vector<std::pair<float, token_id>> cand;
  std::vector<float> prob;
  std::vector<size_t> pick;    ///< positions in cand of the best few (the first chunk of a draw)
  std::vector<float> edited;   ///< the row with logit edits applied
  std::vector<logit_edit> row_edits;  ///< a drafted row's edits: its sequence's, plus the drafts before it
};

/// Greedy when temperature == 0 (ties go to the lowest id). Otherwise, in order: divide by
/// temperature, keep the top_k most likely, keep the smallest nucleus reaching top_p, drop those
/// below min_p x the best probability, renormalise and draw with sample_coin(seed, position).
/// `allowed` (structured outputs), when not empty, is a bitmask of ceil(vocab/32) words: token t
/// may be drawn only if bit t%32 of word t/32 is set; the steps above run over those tokens
/// alone. A mask that allows nothing is ignored (the caller's constraint then refuses the token).
/// `edits` (logit_bias and penalties, engine/logit_edits.hpp) change the logits the draw sees,
/// greedy included, before everything above; the returned logprob is still the raw one.
sample_result sample_token(std::span<const float> logits, const sampling_params& p, int64_t position,
                           sampler_scratch& scratch, std::span<const uint32_t> allowed = {},
                           std::span<const logit_edit> edits = {});

/// The log-probability of `token` under softmax(raw logits): a prompt token's score.
float logprob_of(std::span<const float> logits, token_id token);

/// The `n` most likely tokens under softmax(raw logits), most likely first (ties: lower id).
void top_logprobs(std::span<const float> logits, int32_t n, std::vector<token_logprob>& out, sampler_scratch& scratch);

} // namespace conveyor::model
