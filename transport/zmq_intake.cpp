#include "transport/zmq_intake.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <zmq_addon.hpp>

#include "transport/frame_rules.hpp"
#include "transport/sockets.hpp"

namespace conveyor::transport {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);

zmq::socket_t bind_intake(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint, std::string_view what,
                          const schemas::decode_limits& limits, const curve_server_config& curve) {
  zmq::socket_t s = bind_socket(ctx, type, endpoint, what, curve, intake_max_frame_bytes(limits));
  if (type == zmq::socket_type::router) s.set(zmq::sockopt::router_mandatory, 1);
  return s;
}

// The frames of a message, from `first` on, as byte spans.
std::vector<std::span<const uint8_t>> spans_of(const std::vector<zmq::message_t>& parts, size_t first) {
  std::vector<std::span<const uint8_t>> out;
  for (size_t i = first; i < parts.size(); ++i) out.emplace_back(static_cast<const uint8_t*>(parts[i].data()), parts[i].size());
  return out;
}

} // namespace

int64_t intake_max_frame_bytes(const schemas::decode_limits& limits) {
  return static_cast<int64_t>(2 * limits.max_message_bytes);
}

zmq_socket_intake::zmq_socket_intake(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint, std::string_view what,
                                     const schemas::decode_limits& limits, const curve_server_config& curve)
    : sock_(bind_intake(ctx, type, endpoint, what, limits, curve)), endpoint_(bound_endpoint(sock_)), limits_(limits) {}

void zmq_socket_intake::start(const intake_context& ctx) {
  thread_ = std::thread([this, sink = ctx.sink] { run(*sink); });
}

void zmq_socket_intake::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

router_intake::router_intake(zmq::context_t& ctx, const std::string& endpoint, const schemas::decode_limits& limits,
                             const curve_server_config& curve)
    : zmq_socket_intake(ctx, zmq::socket_type::router, endpoint, "--router", limits, curve) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("eventfd() failed for the ROUTER intake");
}

router_intake::~router_intake() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void router_intake::reply(uint64_t tag, schemas::reply r) {
  schemas::wire_bytes bytes = schemas::encode(r);  // here, on the replying thread, as before the queue
  {
    std::lock_guard lk(mu_);
    arrived_.emplace_back(tag, std::move(bytes));
  }
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void router_intake::run(request_sink& sink) {
  zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  while (!stop_) {
    try {
      zmq::poll(items, 2, kPollInterval);
      if (items[1].revents & ZMQ_POLLIN) send_ready_replies();
      if (items[0].revents & ZMQ_POLLIN) receive(sink);
    } catch (const zmq::error_t&) {
      // EINTR from a signal: poll again.
    }
  }
}

// One message: [routing id, body] from a DEALER. Any other shape gets an error reply too
// (frame_rules.hpp).
void router_intake::receive(request_sink& sink) {
  std::vector<zmq::message_t> parts;
  if (!zmq::recv_multipart(sock_, std::back_inserter(parts), zmq::recv_flags::dontwait) || parts.empty()) return;
  const uint64_t tag = next_tag_++;
  std::string peer = parts[0].to_string();
  order_[peer].push_back(tag);
  pending_.emplace(tag, pending_reply{std::move(peer), std::nullopt});
  sink.deliver({this, tag}, decode_message(spans_of(parts, 1), intake_kind::router, limits_));
}

// Replies arrive in any order; each peer gets them in its request order.
void router_intake::send_ready_replies() {
  uint64_t count = 0;
  [[maybe_unused]] auto n = ::read(wake_fd_, &count, sizeof count);
  std::vector<std::pair<uint64_t, schemas::wire_bytes>> arrived;
  {
    std::lock_guard lk(mu_);
    arrived.swap(arrived_);
  }
  for (auto& [tag, bytes] : arrived) {
    auto it = pending_.find(tag);
    if (it == pending_.end()) continue;  // a second reply to one request: a bug upstream; drop it
    it->second.bytes = std::move(bytes);
    auto q = order_.find(it->second.peer);
    while (q != order_.end() && !q->second.empty()) {
      auto head = pending_.find(q->second.front());
      if (!head->second.bytes) break;
      try {
        sock_.send(zmq::buffer(head->second.peer), zmq::send_flags::sndmore);
        sock_.send(zmq::buffer(*head->second.bytes), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
        // The peer is gone (ROUTER_MANDATORY: host unreachable): its reply has nobody to reach.
      }
      pending_.erase(head);
      q->second.pop_front();
    }
    if (q != order_.end() && q->second.empty()) order_.erase(q);
  }
}

pull_intake::pull_intake(zmq::context_t& ctx, const std::string& endpoint, const schemas::decode_limits& limits,
                         const curve_server_config& curve)
    : zmq_socket_intake(ctx, zmq::socket_type::pull, endpoint, "--pull", limits, curve) {}

pull_intake::~pull_intake() { stop(); }  // (before the socket goes: the thread uses it)

void pull_intake::run(request_sink& sink) {
  zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}};
  std::vector<zmq::message_t> parts;
  while (!stop_) {
    try {
      zmq::poll(items, 1, kPollInterval);
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      parts.clear();
      if (!zmq::recv_multipart(sock_, std::back_inserter(parts), zmq::recv_flags::dontwait)) continue;
      sink.deliver({}, decode_message(spans_of(parts, 0), intake_kind::pull, limits_));
    } catch (const zmq::error_t&) {
      // EINTR: poll again.
    }
  }
}

} // namespace conveyor::transport
