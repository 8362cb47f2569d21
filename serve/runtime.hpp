// The whole serving runtime in one object: ZeroMQ context, the bound sockets, the actor system,
// the actors, the intake threads. `conveyor serve` and the integration tests both build one.
// Every socket is bound before the actor system exists, so a taken port fails start-up with
// nothing to unwind. Member order is the destruction order (reverse): actors and actor system,
// then the intakes (actors may reply into them until the end), the ZAP handler, the context.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "actors/front_actor.hpp"
#include "actors/metrics.hpp"
#include "actors/publisher_actor.hpp"
#include "actors/runtime_control.hpp"
#include "actors/scheduler_actor.hpp"
#include "engine/config.hpp"
#include "engine/executor.hpp"
#include "serve/tool_plans.hpp"
#include "transport/curve.hpp"
#include "transport/http_intake.hpp"
#include "transport/metrics_http.hpp"
#include "transport/nats_intake.hpp"
#include "transport/sockets.hpp"
#include "transport/zmq_intake.hpp"

namespace conveyor::serve {

struct runtime_options {
  scheduler_config sched;
  cache_config cache;
  actors::publisher_config pub;
  schemas::decode_limits limits;
  std::string router_ep = "tcp://127.0.0.1:5555";
  std::string pub_ep = "tcp://127.0.0.1:5556";
  std::string pull_ep = "tcp://127.0.0.1:5557";
  std::string model_name;
  /// A chat template (Jinja source) used instead of the model's (--chat-template); nullopt: the model's.
  std::optional<std::string> chat_template;
  /// CAF worker threads (the executor and publisher have their own).
  int worker_threads = 2;
  /// Prometheus /metrics over HTTP: -1 off, 0 any free port, > 0 that port (bind failure
  /// throws transport::bind_error).
  int metrics_port = -1;
  std::string metrics_host = "127.0.0.1";
  /// The OpenAI-compatible HTTP intake: port -1 off, 0 any free port (its model name and decode
  /// limits are the runtime's).
  transport::http_config http;
  /// API keys for HTTP /v1 and /metrics (null or none set: open).
  std::shared_ptr<const transport::api_keys> api_keys;
  /// The iteration trace (JSON Lines, one line per step); empty: off. An unwritable path makes
  /// the constructor throw trace_error.
  std::string trace_path;
  /// CURVE on the ROUTER, PULL and PUB sockets with a ZAP allow-list; off when its secret_key is
  /// empty (the default: plain TCP).
  transport::curve_server_config curve;
  /// The job journal, opened by the caller (null: off, and a crash loses every live job). The
  /// runtime resumes what it holds and writes every accepted job and event to it.
  std::shared_ptr<journal::journal> journal;
  /// A job running in this many consecutive crashes ends with an error instead (0: never).
  int32_t poison_after = 2;
  /// NATS JetStream: jobs from the shared consumer, every job's events to the events stream
  /// (url empty: off). Connecting fails start-up with transport::nats_error.
  transport::nats_config nats;

  /// The HTTP intake's configuration with the runtime's model name, decode limits and keys.
  transport::http_config http_config() const {
    transport::http_config hc = http;
    hc.model_name = model_name;
    hc.limits = limits;
    hc.keys = api_keys;
    return hc;
  }
};

/// What the runtime found in the journal at start.
struct recovery_counts {
  size_t finished = 0, resumed = 0, poisoned = 0;
};

/// Every way in and out of a runtime, bound or connected at once: the intakes (ZeroMQ ROUTER and
/// PULL, HTTP, NATS; the list make_intakes() builds from the options), the PUB socket with
/// CURVE's ZAP handler, /metrics. `conveyor serve` makes them before the model loads, so a taken
/// port or an unreachable NATS fails start-up in well under a second. Nothing listens to its
/// callers until the runtime built on it starts. Member order is the destruction order (reverse).
struct bound_endpoints {
  /// Throws transport::bind_error naming the flag and the fix (transport::nats_error for NATS).
  explicit bound_endpoints(const runtime_options& o);
  /// The intake named `name` ("router", "pull", "http", "nats"), or null.
  transport::intake* find(std::string_view name) const;
  zmq::context_t zmq;
  std::unique_ptr<transport::zap_authenticator> zap;  // CURVE on: before any socket binds
  std::unique_ptr<transport::metrics_http> metrics;
  std::shared_ptr<transport::pub_socket> pub;  // then the publisher's alone (its first event sink)
  std::vector<std::unique_ptr<transport::intake>> intakes;  // outlive the publisher that feeds their sinks
};

/// The intakes the options ask for, bound (or connected), in start order. Adding a way in is one
/// line here (and its own files): docs/architecture.md, "Adding an intake".
std::vector<std::unique_ptr<transport::intake>> make_intakes(zmq::context_t& zmq, const runtime_options& o);

class runtime {
public:
  /// Opens the trace file when asked (throws actors::trace_error), binds every socket (throws
  /// transport::bind_error), then spawns the actors and starts serving.
  /// `tok` must outlive the runtime; the executor's KV pool size sets the scheduler's blocks.
  runtime(const runtime_options& o, std::shared_ptr<executor> ex, const model::tokenizer& tok);
  /// The same on sockets bound earlier (from the same options).
  runtime(const runtime_options& o, std::unique_ptr<bound_endpoints> eps, std::shared_ptr<executor> ex, const model::tokenizer& tok);
  ~runtime();

  const std::string& router_endpoint() const { return endpoint_of("router"); }
  const std::string& pub_endpoint() const { return pub_; }
  const std::string& pull_endpoint() const { return endpoint_of("pull"); }
  actors::runtime_control& control() { return control_; }
  /// "http://host:port/metrics", or "" when metrics_port is -1.
  std::string metrics_url() const { return eps_->metrics ? eps_->metrics->url() : std::string(); }
  /// The OpenAI-compatible HTTP intake's "http://host:port", or "" when off.
  std::string http_endpoint() const { return endpoint_of("http"); }
  /// The bound /metrics port (resolves 0), or -1 when off.
  int metrics_port() const { return eps_->metrics ? eps_->metrics->port() : -1; }
  const recovery_counts& recovered() const { return recovered_; }
  /// Why the model's chat template did not compile ("" when it did): jobs with `messages` are
  /// then refused, the rest serves.
  const std::string& chat_template_error() const { return chat_error_; }
  /// Tool calling's start-up problems ("" when none): the template does not compile for tools,
  /// or its tool-call grammar is not enforceable.
  const std::string& tool_chat_error() const { return tools_.error; }
  const std::string& tool_chat_warning() const { return tools_.warning; }

  /// Stops accepting jobs (they get shutting_down), lets live ones run for `timeout_s`, cancels
  /// the rest (each gets its done event), flushes their events and stops every thread.
  /// Returns the exit code: 0, or 1 after an executor failure. Idempotent.
  /// NOTE: call it on the thread that constructed the runtime: with CAF 0.17.6, destroying the
  /// actor system from another thread was seen to wait forever in ~actor_system.
  int shutdown(double timeout_s);

private:
  /// The /metrics body: the scheduler's numbers (asked with a timeout) and ours; nullopt when the
  /// scheduler does not answer. Runs on the HTTP pool threads, only between start and shutdown.
  std::optional<std::string> render_metrics();
  /// The bound endpoint of the intake named `name` ("" when there is none).
  const std::string& endpoint_of(std::string_view name) const;

  std::unique_ptr<bound_endpoints> eps_;  // the sockets: outlive everything below
  actors::metrics metrics_;  // outlives the actors and the HTTP thread that use it
  std::unique_ptr<model::grammar_compiler> grammars_;  // structured outputs; outlives the actors
  std::unique_ptr<model::chat_template> chat_;  // null: chat_error_ says why; outlives the actors
  std::string chat_error_;
  tool_support tools_;  // HTTP tool calling; outlives the intakes
  caf::actor_system_config caf_cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  actors::runtime_control control_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> live_requests_{0};
  std::atomic<int32_t> waiting_jobs_{0};  // after each step: jobs the scheduler could not admit yet
  std::shared_ptr<actors::trace_writer> trace_;
  std::optional<actors::executor_actor> executor_;
  std::optional<actors::scheduler_actor> scheduler_;
  std::optional<actors::publisher_actor> publisher_;
  std::optional<actors::front_actor> front_;
  std::unique_ptr<actors::front_door> door_;
  std::string pub_;
  recovery_counts recovered_;
  bool stopped_ = false;
};

} // namespace conveyor::serve
