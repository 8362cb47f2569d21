// Pure. How the next token of one sequence is drawn from its logits.
// The randomness is counter-based: (seed, position) fully determines the draw, so a
// sequence's output never depends on the batch it ran in, nor on preemption.
#pragma once

#include <cstdint>
#include <string>

namespace conveyor {

/// Most alternatives a sampled token may report (OpenAI's limit).
inline constexpr int32_t max_top_logprobs = 20;

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

  /// Returns an empty string when valid, else a message naming the field and the allowed range.
  std::string validate() const;
};

} // namespace conveyor
