// Test support: runs several sequences greedily through an executor, each with its own
// prompt-chunk size and start step, building step plans by hand (disjoint block ranges).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/executor.hpp"
#include "engine/sampling_params.hpp"

namespace conveyor::model {

struct driven_seq {
  std::vector<token_id> prompt;
  int32_t chunk = 0;        ///< prompt tokens per step; 0 = the whole prompt at once
  int32_t start_step = 0;   ///< first step this sequence takes part in
  int32_t max_new = 8;      ///< tokens to generate
  sampling_params sampling = greedy();  ///< greedy unless a test sets a temperature and seed
  std::vector<token_id> out;  ///< filled by run_greedy
  std::vector<float> first_logits;  ///< logits behind out[0] (filled when the executor exposes them)
  uint64_t logits_hash = 0;  ///< FNV-1a over the bytes of every sampled row's logits, in order

  static sampling_params greedy() {
    sampling_params p;
    p.temperature = 0.0f;
    return p;
  }
};

/// Runs every sequence to completion (max_new tokens each; no EOS stop; `sampling` per sequence). Sequence i owns blocks
/// [i * blocks_per_seq, (i + 1) * blocks_per_seq). `logits_of(k)` (may be empty) returns the
/// k-th sampled row's logits of the last step. Returns the number of steps taken.
int32_t run_greedy(executor& ex, std::vector<driven_seq>& seqs, int32_t blocks_per_seq,
                   const std::function<std::vector<float>(size_t)>& logits_of = {});

} // namespace conveyor::model
