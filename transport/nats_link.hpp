// One replica's connection to NATS JetStream: connects (reconnecting forever afterwards, with
// log lines on disconnect and reconnect), makes sure the jobs, events and dead-letter streams
// and the shared durable pull consumer exist, and wraps the few calls the NATS intake makes.
// Every failure at start-up is a nats_error naming the server and the fix (exit 2 in serve).
// nats.c objects are thread-safe; the intake's fetch thread and event thread share this link.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "schemas/protocol.hpp"
#include "transport/nats_config.hpp"

typedef struct __natsConnection natsConnection;
typedef struct __natsMsg natsMsg;
typedef struct __natsSubscription natsSubscription;
typedef struct __jsCtx jsCtx;

namespace conveyor::transport {

struct nats_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A fetched job message. Owns the natsMsg; moves only.
class nats_job_msg {
public:
  nats_job_msg() = default;
  explicit nats_job_msg(natsMsg* m) : m_(m) {}
  ~nats_job_msg();
  nats_job_msg(nats_job_msg&& o) noexcept : m_(o.m_) { o.m_ = nullptr; }
  nats_job_msg& operator=(nats_job_msg&& o) noexcept;
  nats_job_msg(const nats_job_msg&) = delete;
  nats_job_msg& operator=(const nats_job_msg&) = delete;

  std::vector<uint8_t> data() const;
  uint64_t num_delivered() const;  ///< 1 on the first delivery (0 when unknown)
  /// Acks; false when it could not be sent (the connection is down: it will be redelivered).
  bool ack();
  bool in_progress();
  bool nak();
  bool term();

private:
  natsMsg* m_ = nullptr;
};

/// One event to store: its subject, message id and body.
struct nats_event_out {
  std::string job_id;
  uint64_t seq = 0;
  schemas::wire_bytes body;
  bool terminal = false;
};

class nats_link {
public:
  /// Connects and sets up the streams and consumer. Throws nats_error.
  explicit nats_link(const nats_config& cfg);
  ~nats_link();
  nats_link(const nats_link&) = delete;
  nats_link& operator=(const nats_link&) = delete;

  struct async_errors;  // the failed asynchronous publishes (filled on nats.c's thread)

  const nats_config& config() const { return cfg_; }

  /// Up to `batch` job messages, waiting at most `timeout_ms`; empty on a timeout or while
  /// disconnected (`error` then says why, once per outage).
  std::vector<nats_job_msg> fetch(int batch, int64_t timeout_ms, std::string* error);

  /// Stores `events` (async publishes with message ids, then one wait for every ack, at most
  /// `wait_ms`). Returns the indexes of the ones JetStream confirmed (a duplicate id counts: it
  /// was stored before); the others are to be sent again.
  std::vector<size_t> store(const std::vector<nats_event_out>& events, int64_t wait_ms);

  /// Every stored event of a job, in seq order (empty: none), or nullopt when the events
  /// stream could not be read (`error` then says why).
  std::optional<std::vector<schemas::wire_bytes>> read_events(const std::string& job_id, int64_t wait_ms,
                                                              std::string* error = nullptr);

  /// Publishes a dead letter (synchronously); false on failure.
  bool dead_letter(const std::string& job_id, const schemas::wire_bytes& body);

private:
  void ensure_streams();
  void close();  // waits for nats.c's last callback
  std::optional<std::vector<schemas::wire_bytes>> read_events_by_consumer(const std::string& subject, int64_t wait_ms,
                                                                          std::string* error);

  nats_config cfg_;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  natsSubscription* sub_ = nullptr;
  std::unique_ptr<async_errors> errors_;
};

} // namespace conveyor::transport
