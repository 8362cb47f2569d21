// The intake thread: owns the ROUTER (request/reply ops) and PULL (fire-and-forget submits)
// sockets, polls them, and hands every frame to a handler. One thread owns both sockets; the
// handler runs on it and may block (it asks actors and waits for their answers).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

namespace conveyor::transport {

class intake_handler {
public:
  virtual ~intake_handler() = default;
  /// One ROUTER frame; returns the reply frame (exactly one reply per request).
  virtual std::vector<uint8_t> on_router(std::span<const uint8_t> frame) = 0;
  /// One PULL frame; its outcome is published as the job's first event.
  virtual void on_pull(std::span<const uint8_t> frame) = 0;
};

class intake {
public:
  /// Binds both sockets at once (throws bind_error); the thread starts with start().
  intake(zmq::context_t& ctx, const std::string& router_ep, const std::string& pull_ep, intake_handler& handler);
  ~intake();
  void start();
  /// Stops polling and joins the thread (the sockets close with it).
  void stop();
  const std::string& router_endpoint() const { return router_ep_; }
  const std::string& pull_endpoint() const { return pull_ep_; }
  /// Frames that were not a well-formed ZeroMQ request (e.g. a ROUTER message without a body).
  uint64_t num_malformed() const { return malformed_.load(); }

private:
  void run();

  zmq::socket_t router_, pull_;
  std::string router_ep_, pull_ep_;
  intake_handler& handler_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> malformed_{0};
  std::thread thread_;
};

} // namespace conveyor::transport
