// ZeroMQ socket set-up shared by the intake thread and the publisher: every socket gets
// linger 0 (so shutdown never blocks on undelivered messages) and binds with a clear error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "transport/curve.hpp"
#include "transport/event_sink.hpp"

namespace conveyor::transport {

/// A socket could not be bound. what() names the endpoint, the reason and the fix.
struct bind_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Creates a socket of `type`, sets linger 0 and binds it to `endpoint` ("tcp://127.0.0.1:*"
/// picks a free port). `what` names its role in errors ("--router"). With `curve` enabled the
/// socket is a CURVE server (apply_curve_server) before it binds. `max_frame_bytes` > 0 sets
/// ZMQ_MAXMSGSIZE: a peer that sends a bigger frame is disconnected before it is read.
zmq::socket_t bind_socket(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint, std::string_view what,
                          const curve_server_config& curve = {}, int64_t max_frame_bytes = -1);
/// Binds an already configured socket (options such as the high-water marks must be set before
/// bind: ZeroMQ copies them into each connection). Throws bind_error.
void bind_or_throw(zmq::socket_t& s, const std::string& endpoint, std::string_view what);

/// The endpoint a socket is actually bound to (resolves "*" ports).
std::string bound_endpoint(zmq::socket_t& s);

/// The PUB socket: sends [topic, body] as one two-frame message. Never blocks; a subscriber
/// that falls behind the high-water mark loses messages and repairs them with `fetch`. As an
/// event sink: a job's events on "job/<id>/", heartbeats on "sys/" (the publisher's thread is
/// its only user once the runtime runs).
class pub_socket final : public event_sink {
public:
  pub_socket(zmq::context_t& ctx, const std::string& endpoint, const curve_server_config& curve = {});
  void send(std::string_view topic, std::string_view body);
  void on_event(const schemas::published_event& ev) override;
  void on_refusal(const schemas::published_event& ev) override { on_event(ev); }
  void on_heartbeat(const schemas::wire_bytes& hb) override;
  std::string endpoint() { return bound_endpoint(sock_); }

private:
  zmq::socket_t sock_;
};

} // namespace conveyor::transport
