#include "transport/sockets.hpp"

namespace conveyor::transport {

zmq::socket_t bind_socket(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint, std::string_view what) {
  zmq::socket_t s(ctx, type);
  s.set(zmq::sockopt::linger, 0);
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw bind_error("cannot bind " + std::string(what) + " " + endpoint + ": " + e.what() +
                     "; pass another endpoint with " + std::string(what) + " (e.g. tcp://127.0.0.1:*)");
  }
  return s;
}

std::string bound_endpoint(zmq::socket_t& s) { return s.get(zmq::sockopt::last_endpoint); }

pub_socket::pub_socket(zmq::context_t& ctx, const std::string& endpoint) : sock_(bind_socket(ctx, zmq::socket_type::pub, endpoint, "--pub")) {
  sock_.set(zmq::sockopt::sndhwm, 1 << 20);
  // Unlike the other sockets, give queued events up to 2 s to leave at shutdown: the last
  // `done` events of a drain must reach their subscribers.
  sock_.set(zmq::sockopt::linger, 2000);
}

void pub_socket::send(std::string_view topic, std::string_view body) {
  sock_.send(zmq::buffer(topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  sock_.send(zmq::buffer(body), zmq::send_flags::dontwait);
}

} // namespace conveyor::transport
