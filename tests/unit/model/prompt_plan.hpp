// Test plans for prompt logprobs (shared by the CPU and the GPU tier): a chunk [begin, end) of a
// prompt as the scheduler plans it, each row before the prompt's last scoring the token after it.
#pragma once

#include <algorithm>
#include <vector>

#include "engine/step.hpp"

namespace conveyor::testing {

inline scheduled_seq scored_chunk(seq_id id, const std::vector<token_id>& prompt, int32_t begin, int32_t end,
                                  std::vector<block_id> table, int32_t top) {
  scheduled_seq s;
  s.id = id;
  s.num_computed_tokens = begin;
  s.tokens.assign(prompt.begin() + begin, prompt.begin() + end);
  s.block_table = std::move(table);
  s.sample = end == static_cast<int32_t>(prompt.size());
  s.sampling.temperature = 0.0f;
  for (int32_t p = begin; p < std::min(end, static_cast<int32_t>(prompt.size()) - 1); ++p)
    s.prompt_targets.push_back(prompt[static_cast<size_t>(p) + 1]);
  s.prompt_top = top;
  return s;
}

} // namespace conveyor::testing
