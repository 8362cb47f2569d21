#include "transport/sockets.hpp"

namespace conveyor::transport {

void bind_or_throw(zmq::socket_t& s, const std::string& endpoint, std::string_view what) {
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw bind_error("cannot bind " + std::string(what) + " " + endpoint + ": " + e.what() +
                     "; pass another endpoint with " + std::string(what) + " (e.g. tcp://127.0.0.1:*)");
  }
}

zmq::socket_t bind_socket(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint, std::string_view what,
                          const curve_server_config& curve, int64_t max_frame_bytes) {
  zmq::socket_t s(ctx, type);
  s.set(zmq::sockopt::linger, 0);
  if (max_frame_bytes > 0) s.set(zmq::sockopt::maxmsgsize, max_frame_bytes);
  apply_curve_server(s, curve);
  bind_or_throw(s, endpoint, what);
  return s;
}

std::string bound_endpoint(zmq::socket_t& s) { return s.get(zmq::sockopt::last_endpoint); }

pub_socket::pub_socket(zmq::context_t& ctx, const std::string& endpoint, const curve_server_config& curve)
    : sock_(ctx, zmq::socket_type::pub) {
  apply_curve_server(sock_, curve);
  // Before bind: ZeroMQ copies the high-water mark into each connection when it is made, so a
  // limit set later leaves subscribers at the default 1000 messages (and events get dropped).
  sock_.set(zmq::sockopt::sndhwm, 1 << 20);
  // Unlike the other sockets, give queued events up to 2 s to leave at shutdown: the last
  // `done` events of a drain must reach their subscribers.
  sock_.set(zmq::sockopt::linger, 2000);
  bind_or_throw(sock_, endpoint, "--pub");
}

void pub_socket::send(std::string_view topic, std::string_view body) {
  sock_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  sock_.send(zmq::buffer(body), zmq::send_flags::dontwait);
}

namespace {
std::string_view as_view(const schemas::wire_bytes& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }
} // namespace

void pub_socket::on_event(const schemas::published_event& ev) { send(schemas::topic_for(ev.job_id()), as_view(ev.wire)); }

void pub_socket::on_heartbeat(const schemas::wire_bytes& hb) { send(schemas::heartbeat_topic, as_view(hb)); }

} // namespace conveyor::transport
