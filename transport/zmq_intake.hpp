// The ZeroMQ intakes: ROUTER (request/reply ops from DEALERs) and PULL (fire-and-forget submits
// from PUSHes). Each owns its socket and the one thread that uses it; each decodes frames there
// (bounded by the decode limits and by ZMQ_MAXMSGSIZE, so a huge frame is never read into
// memory) and hands them to the request_sink without waiting. The ROUTER intake's replies come
// back from any thread through a queue and an eventfd its poller watches, and leave in request
// order per peer (protocol.md: every request gets one reply, in order per DEALER).
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "transport/curve.hpp"
#include "transport/intake.hpp"

namespace conveyor::transport {

/// ZMQ_MAXMSGSIZE for an intake: twice the decode limit. A frame up to that size is read and
/// refused with too_long; ZeroMQ disconnects a peer that sends a bigger one before reading it.
int64_t intake_max_frame_bytes(const schemas::decode_limits& limits);

/// What both ZeroMQ intakes are: a socket bound in the constructor (throws bind_error naming
/// the flag `what`), and the one thread that uses it, from start() to stop().
class zmq_socket_intake : public intake {
public:
  void start(const intake_context& ctx) override;
  void stop() override;
  const std::string& endpoint() const override { return endpoint_; }

protected:
  zmq_socket_intake(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint, std::string_view what,
                    const schemas::decode_limits& limits, const curve_server_config& curve);
  /// The socket thread's loop, until stop_.
  virtual void run(request_sink& sink) = 0;

  zmq::socket_t sock_;
  std::string endpoint_;
  schemas::decode_limits limits_;
  std::atomic<bool> stop_{false};

private:
  std::thread thread_;
};

class router_intake final : public zmq_socket_intake, public reply_channel {
public:
  router_intake(zmq::context_t& ctx, const std::string& endpoint, const schemas::decode_limits& limits,
                const curve_server_config& curve = {});
  ~router_intake() override;
  const char* name() const override { return "router"; }
  void reply(uint64_t tag, schemas::reply r) override;

private:
  struct pending_reply {
    std::string peer;  // the DEALER's routing id
    std::optional<schemas::wire_bytes> bytes;
  };
  void run(request_sink& sink) override;
  void receive(request_sink& sink);
  void send_ready_replies();

  int wake_fd_ = -1;
  std::mutex mu_;
  std::vector<std::pair<uint64_t, schemas::wire_bytes>> arrived_;  // guarded by mu_
  // Intake thread only:
  std::unordered_map<uint64_t, pending_reply> pending_;
  std::unordered_map<std::string, std::deque<uint64_t>> order_;  // per peer, tags in request order
  uint64_t next_tag_ = 1;
};

class pull_intake final : public zmq_socket_intake {
public:
  pull_intake(zmq::context_t& ctx, const std::string& endpoint, const schemas::decode_limits& limits,
              const curve_server_config& curve = {});
  ~pull_intake() override;
  const char* name() const override { return "pull"; }

private:
  void run(request_sink& sink) override;
};

} // namespace conveyor::transport
