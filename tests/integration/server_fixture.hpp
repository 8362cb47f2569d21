// Test support: an in-process `runtime` on ephemeral loopback ports, and a producer speaking
// the protocol with its own msgpack codec (nlohmann::json's), independent of schemas/.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "serve/runtime.hpp"
#include "model/formats/gguf.hpp"
#include "model/text/tokenizer.hpp"

namespace conveyor::testing {

using json = nlohmann::json;

/// The SmolLM2 file and tokenizer, loaded once per process (fails with a HINT when absent).
struct smollm2 {
  static const smollm2& get();
  std::unique_ptr<model::gguf_file> file;
  std::unique_ptr<model::tokenizer> tok;
};

/// A running server. executor: "cpu" (SmolLM2) or "null" (fixed token, tokenizer of SmolLM2).
struct server {
  explicit server(const std::string& executor = "cpu", std::function<void(serve::runtime_options&)> tweak = {});
  ~server();
  std::unique_ptr<serve::runtime> rt;
};

/// One producer: a DEALER for requests and a SUB for events.
class producer {
public:
  explicit producer(const serve::runtime& rt);
  /// Sends one map, returns the reply map.
  json request(const json& msg);
  /// Sends raw bytes on the DEALER, returns the reply map.
  json request_raw(const std::string& bytes);
  /// PUSHes one map to the PULL socket.
  void push(const json& msg);
  /// Subscribes to "job/<id>/" and waits until the subscription is live (heartbeat seen).
  void subscribe(const std::string& id);
  /// Events of `id` until its terminal event (or timeout), in arrival order.
  std::vector<json> collect(const std::string& id, std::chrono::seconds timeout = std::chrono::seconds(120));

private:
  zmq::context_t ctx_;
  zmq::socket_t dealer_, sub_, push_;
  std::map<std::string, std::vector<json>> pending_;  // events seen for other ids
};

/// Checks a complete stream: seq 0.. without gaps, starts with accepted, exactly one terminal
/// event, last. Returns the concatenated text deltas.
std::string check_stream(const std::vector<json>& events);

} // namespace conveyor::testing
