// Pure: what an intake makes of one ZeroMQ message, before any actor sees it. A request is
// exactly one frame holding one msgpack map (after the ROUTER's routing id); any other shape is
// refused with bad_request, and the one frame goes to schemas::decode_request. No sockets here,
// so the fuzz target (tests/fuzz) runs the very rules the intakes run.
#pragma once

#include <cstdint>
#include <span>

#include "schemas/requests.hpp"

namespace conveyor::transport {

enum class intake_kind {
  router,  ///< request/reply: any op
  pull,    ///< fire-and-forget: everything is meant as a submit
};

/// `frames`: the message's frames (for ROUTER, those after the routing id). Never throws.
schemas::decode_result decode_message(std::span<const std::span<const uint8_t>> frames, intake_kind kind,
                                      const schemas::decode_limits& limits);

} // namespace conveyor::transport
