// Pure. Token-wise stop conditions, checked after each sampled token. Stop strings need text:
// the request actor checks them and calls scheduler::finish(id, finish_reason::stop).
#pragma once

#include <cstdint>
#include <optional>

#include "engine/request.hpp"
#include "engine/sequence.hpp"

namespace conveyor {

/// Whether `seq` stops after its newest token, in vLLM's order: EOS (unless ignore_eos) and
/// stop token ids once min_tokens outputs exist -> stop; then max_tokens outputs or
/// max_model_len tokens in all -> length. nullopt: go on.
std::optional<finish_reason> check_stop(const sequence& seq, int32_t max_model_len);

} // namespace conveyor
