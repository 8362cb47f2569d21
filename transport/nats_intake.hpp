// The NATS JetStream intake: jobs come from the shared durable pull consumer, events go to the
// events stream, and a job's message is acked only once its terminal event is stored there.
//
//   fetch thread:  credit = min(free slots (0 while jobs wait for KV), max_in_flight - held);
//                  a first delivery goes to the front door as a new job; a redelivery reads
//                  the job's stored events first (held, retried while they cannot be read):
//                  ended -> ack; else it resumes at the next seq;
//                  the delivery that reaches max_deliver is dead-lettered (error event + Term)
//   event thread:  every event the publisher sent (this intake is one of its event sinks) -> async publishes with msg id
//                  "<id>:<seq>" -> one wait for the acks -> a stored terminal event acks its
//                  job; refusals: overloaded / shutting_down -> Nak (another replica takes it),
//                  others -> error event + dead letter; every ack_wait/3 an in-progress ack
//                  for each held job; unconfirmed events are sent again (JetStream drops the
//                  repeats by msg id)
//
// While draining, a held job's `cancelled` done event is not stored: the job is Nak'ed and
// another replica continues it from its stored events. On stop, every held job is Nak'ed.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/intake.hpp"
#include "transport/nats_link.hpp"

namespace conveyor::transport {

class nats_intake final : public intake, public reply_channel, public event_sink {
public:
  /// Connects (throws nats_error naming the server and the fix). At most `max_in_flight` jobs
  /// are held from the consumer, and no more than the context's free_slots() at a time.
  nats_intake(const nats_config& cfg, const schemas::decode_limits& limits, int64_t max_in_flight);
  ~nats_intake() override;
  void start(const intake_context& ctx) override;
  /// Stops taking jobs; events still go out (the runtime drains, then calls stop()).
  void stop_accepting() override;
  /// Stores what is left (at most a few seconds), Naks every held job, joins the threads.
  void stop() override;
  const char* name() const override { return "nats"; }
  const std::string& endpoint() const override { return link_->config().url; }
  event_sink* events() override { return this; }
  void reply(uint64_t tag, schemas::reply r) override;

  /// One event of a job, as the publisher sends it: queued for the events stream.
  void on_event(const schemas::published_event& ev) override;

private:
  struct held_job {
    nats_job_msg msg;
    schemas::wire_bytes request;
    uint64_t delivered = 0;
  };
  struct unresolved_job {
    schemas::submit_request job;
    std::chrono::steady_clock::time_point tried;
    bool logged = false, done = false;
  };
  void fetch_loop(request_sink& sink);
  void take(nats_job_msg m, request_sink& sink);
  void resolve(unresolved_job& u, request_sink& sink);
  void start_job(schemas::submit_request job, std::optional<resume_point> resume, request_sink& sink);
  void event_loop();
  void on_refused(const std::string& job_id, const schemas::error_reply& why);
  void queue_dead_letter(const std::string& job_id, schemas::error_code code, const std::string& message, uint64_t delivered,
                         const schemas::wire_bytes& request, uint64_t seq, bool event);
  void progress_all();

  std::shared_ptr<nats_link> link_;
  schemas::decode_limits limits_;
  int64_t max_in_flight_;
  std::function<int64_t()> free_slots_;
  std::thread fetcher_, publisher_;
  std::atomic<bool> stop_fetch_{false}, stop_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, held_job> held_;      // by job id
  std::unordered_map<uint64_t, std::string> tags_;      // reply tag -> job id
  std::deque<nats_event_out> events_;                   // to store, in order
  std::vector<std::pair<uint64_t, std::optional<schemas::error_reply>>> replies_;  // (tag, refusal)
  std::vector<std::string> to_nak_;                     // held jobs handed back while draining
  std::vector<std::pair<std::string, schemas::wire_bytes>> dead_;  // dead letters to store
  uint64_t next_tag_ = 1;
  std::vector<unresolved_job> unresolved_;  // fetch thread only
};

} // namespace conveyor::transport
