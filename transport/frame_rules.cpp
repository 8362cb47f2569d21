#include "transport/frame_rules.hpp"

#include <string>

namespace conveyor::transport {

schemas::decode_result decode_message(std::span<const std::span<const uint8_t>> frames, intake_kind kind,
                                      const schemas::decode_limits& limits) {
  if (frames.size() != 1) {
    schemas::decode_error e;
    e.code = schemas::error_code::bad_request;
    e.message = std::string(kind == intake_kind::router ? "the message after the routing id" : "the PUSHed message") + " has " +
                std::to_string(frames.size()) + " frames; a request is exactly one frame holding one msgpack map";
    e.submit = kind == intake_kind::pull;  // everything on PULL is meant as a submit
    return e;
  }
  schemas::decode_result r = schemas::decode_request(frames[0], limits);
  if (auto* e = std::get_if<schemas::decode_error>(&r); e && kind == intake_kind::pull) e->submit = true;
  return r;
}

} // namespace conveyor::transport
