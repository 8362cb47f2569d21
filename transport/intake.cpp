#include "transport/intake.hpp"

#include <zmq_addon.hpp>

#include "transport/sockets.hpp"

namespace conveyor::transport {

intake::intake(zmq::context_t& ctx, const std::string& router_ep, const std::string& pull_ep, intake_handler& handler)
    : router_(bind_socket(ctx, zmq::socket_type::router, router_ep, "--router")),
      pull_(bind_socket(ctx, zmq::socket_type::pull, pull_ep, "--pull")), handler_(handler) {
  router_.set(zmq::sockopt::router_mandatory, 1);
  router_ep_ = bound_endpoint(router_);
  pull_ep_ = bound_endpoint(pull_);
}

intake::~intake() { stop(); }

void intake::start() { thread_ = std::thread([this] { run(); }); }

void intake::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void intake::run() {
  zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {pull_.handle(), 0, ZMQ_POLLIN, 0}};
  std::vector<zmq::message_t> parts;
  while (!stop_) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(50));
      if (items[0].revents & ZMQ_POLLIN) {
        parts.clear();
        (void)zmq::recv_multipart(router_, std::back_inserter(parts), zmq::recv_flags::dontwait);
        // [identity, body] from a DEALER; anything else has no body we can answer.
        if (parts.size() != 2) {
          ++malformed_;
        } else {
          const auto& body = parts[1];
          auto reply = handler_.on_router({static_cast<const uint8_t*>(body.data()), body.size()});
          router_.send(parts[0], zmq::send_flags::sndmore);
          router_.send(zmq::buffer(reply), zmq::send_flags::none);
        }
      }
      if (items[1].revents & ZMQ_POLLIN) {
        parts.clear();
        (void)zmq::recv_multipart(pull_, std::back_inserter(parts), zmq::recv_flags::dontwait);
        if (parts.size() != 1) {
          ++malformed_;
        } else {
          handler_.on_pull({static_cast<const uint8_t*>(parts[0].data()), parts[0].size()});
        }
      }
    } catch (const zmq::error_t&) {
      // The peer vanished before its reply (ROUTER_MANDATORY: host unreachable): drop it.
      ++malformed_;
    }
  }
}

} // namespace conveyor::transport
