// Pure. How the next token of one sequence is drawn from its logits.
// The randomness is counter-based: (seed, position) fully determines the draw, so a
// sequence's output never depends on the batch it ran in, nor on preemption.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/types.hpp"

namespace conveyor {

/// Most alternatives a sampled token may report (OpenAI's limit).
inline constexpr int32_t max_top_logprobs = 20;
/// Most tokens one job's logit_bias may name (OpenAI's limit).
inline constexpr size_t max_logit_bias = 300;

struct sampling_params {
  /// 0 means greedy (argmax, ties to the lowest id). Otherwise logits are divided by it.
  float temperature = 1.0f;
  /// Nucleus sampling: keep the smallest set of tokens whose probability mass reaches top_p. 1 = off.
  float top_p = 1.0f;
  /// Keep only the k most likely tokens. 0 = off.
  int32_t top_k = 0;
  /// Drop tokens whose probability is below min_p times the most likely one's. 0 = off.
  float min_p = 0.0f;
  /// The request's own seed: with (seed, position) the draw is fixed, whatever else runs.
  uint64_t seed = 0;
  /// Report this many most likely tokens (under the unmodified distribution) with each sampled
  /// one, in [0, max_top_logprobs]. Not part of the draw.
  int32_t top_logprobs = 0;
  /// Compute each sampled token's logprob (a softmax over the vocabulary: a few percent of a
  /// small model's step). Off when no one reads it (the job asked for neither logprobs nor
  /// top_logprobs); the token is the same either way. Not part of the draw.
  bool logprobs = true;

  // What the job's own text so far does to its next token's logits, before temperature and
  // truncation, in vLLM's order (engine/logit_edits.hpp has the formula): logit_bias is added,
  // then tokens of the prompt or the output are divided (positive logit) or multiplied
  // (negative) by repetition_penalty, then each output token loses frequency_penalty per time
  // it was produced and presence_penalty once. Greedy draws see them too; logprobs do not.
  /// (token, bias) pairs: distinct tokens in ascending order, biases in [-100, 100]. Empty = off.
  std::vector<std::pair<token_id, float>> logit_bias;
  /// In [-2, 2]; 0 = off. Positive values discourage tokens already in the output.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  /// > 0; 1 = off. Above 1 discourages tokens already in the prompt or the output.
  float repetition_penalty = 1.0f;

  /// True when the next token's logits depend on the tokens before it (any penalty is on).
  bool penalized() const { return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f; }
  /// True when any logit is changed before the draw (a penalty or logit_bias).
  bool edits_logits() const { return penalized() || !logit_bias.empty(); }

  /// Returns an empty string when valid, else a message naming the field and the allowed range.
  std::string validate() const;
};

} // namespace conveyor
