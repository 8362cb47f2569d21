// Pure. What every executor checks before running a plan: a malformed plan is a scheduler bug,
// and must fail loudly rather than read or write outside the KV pool or the vocabulary.
#pragma once

#include <string>

#include "engine/executor.hpp"

namespace conveyor {

/// "" when every sequence of `plan` has tokens, in-vocabulary ids, positions within
/// max_model_len, and a block table of known blocks covering its positions; otherwise the first
/// problem ("sequence 7 uses unknown block 99"). With allow_previous_sample, a k_previous_sample
/// token passes as the one token of a sampling sequence (the executor checks it has that sample).
std::string check_plan(const step_plan& plan, const executor_info& info, bool allow_previous_sample = false);

} // namespace conveyor
