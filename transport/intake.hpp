// The intake interface: every way a request comes in (ZeroMQ ROUTER and PULL today; HTTP and
// NATS next) decodes and validates it on its own thread and hands the result to the runtime's
// request_sink without waiting for anything. The answer comes back through the intake's
// reply_channel, and the intake sends it from the thread that owns its socket.
//
//   intake thread: recv ─ decode ─▶ sink.deliver(reply_to, request)      (never blocks)
//   actors:        ... ─▶ reply_to.send(bytes) ─▶ channel queue + wake-up (any thread)
//   intake thread: wake-up ─ drain queue ─ send on its own socket
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schemas/protocol.hpp"
#include "schemas/requests.hpp"

namespace conveyor::transport {

/// The way back to the senders of an intake's requests. Thread-safe: any thread may reply.
/// An intake that was stopped drops replies.
class reply_channel {
public:
  virtual ~reply_channel() = default;
  /// The reply to the request the intake tagged `tag`.
  virtual void reply(uint64_t tag, schemas::wire_bytes bytes) = 0;
};

/// Where one request's answer goes. A null channel is a fire-and-forget intake (PULL): nobody
/// waits for a reply, so a submit's outcome goes out as the job's first event instead.
struct reply_to {
  reply_channel* channel = nullptr;
  uint64_t tag = 0;

  bool fire_and_forget() const { return channel == nullptr; }
  void send(schemas::wire_bytes bytes) const {
    if (channel) channel->reply(tag, std::move(bytes));
  }
};

/// Where a job that began on another replica goes on (NATS failover): the token ids its stored
/// tokens events carried and the seq of its next event. It gets no `accepted` and no reply.
struct resume_point {
  std::vector<token_id> published;
  uint64_t next_seq = 0;
  double arrival_unix = 0.0;
};

/// What intakes hand requests to (the runtime's front door). Thread-safe; never blocks.
class request_sink {
public:
  virtual ~request_sink() = default;
  /// One decoded request, or the decode_error that refuses it (the sink answers both).
  virtual void deliver(reply_to to, schemas::decode_result request) = 0;
  /// A job to continue from `at` (its events so far are stored elsewhere).
  virtual void deliver_resumed(schemas::submit_request job, resume_point at) = 0;
};

/// One way in. The constructor binds (a taken endpoint throws bind_error before anything else
/// has started); start() begins serving on the intake's own thread; stop() joins it.
class intake {
public:
  virtual ~intake() = default;
  virtual void start(request_sink& sink) = 0;
  virtual void stop() = 0;
  /// The bound endpoint (a "*" port resolved).
  virtual const std::string& endpoint() const = 0;
};

} // namespace conveyor::transport
