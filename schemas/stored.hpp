// What the job journal and the NATS dead letters keep, in the protocol's own encoding: a submit
// map that decode_request() reads back (the resolved seed filled in), and a dead letter. (Stored
// events are read back with decode_event(), schemas/events.hpp.) Pure: msgpack only in the .cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/request.hpp"
#include "engine/step.hpp"
#include "schemas/requests.hpp"

namespace conveyor::schemas {

/// The protocol's submit map ("op":"submit") for `job`: decode_request() of it gives `job` back.
wire_bytes encode(const submit_request& job);

/// A dead letter: {"id":S,"error":{"code":S,"message":S},"deliveries":I,"request":bin} (the
/// job's submit map as it arrived).
wire_bytes encode_dead_letter(const std::string& job_id, error_code code, const std::string& message, uint64_t deliveries,
                              std::span<const uint8_t> request);

} // namespace conveyor::schemas
