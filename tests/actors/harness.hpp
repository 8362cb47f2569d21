// The actor tier's harness: the real front, request, scheduler and executor actors on CAF's
// deterministic test coordinator (every message runs on the test's thread, one at a time, in
// an order the test controls), with a recording fake in place of the publisher (it can hold
// the acknowledgements of tokens events, which drive the job table's flow control), a
// recording reply channel in place of the ROUTER intake, a 256-byte tokenizer, and a scripted
// executor (every sequence's k-th token is 'a' + k % 26; it can be told to throw).
//
//   test ─front_door─▶ front ─▶ request ─▶ scheduler ─▶ executor (scripted_executor)
//                        │          └──p_event──▶ fake publisher (records, holds acks)
//                        └──replies──▶ recording_channel
#pragma once

#include <nlohmann/json.hpp>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/front_actor.hpp"
#include "actors/metrics.hpp"
#include "actors/runtime_control.hpp"
#include "engine/executor.hpp"
#include "model/text/tokenizer.hpp"

namespace conveyor::actor_test {

using json = nlohmann::json;

/// An executor whose tokens the test knows: sequence s's k-th sampled token is 'a' + k % 26
/// (a byte token of the harness's tokenizer). `fail_next` makes the next step throw.
class scripted_executor final : public executor {
public:
  explicit scripted_executor(const executor_info& info) : info_(info) {}
  const executor_info& info() const override { return info_; }
  step_result step(const step_plan& plan) override;
  /// Counts the pipelined plans' placeholders, then the default (resolve, step()).
  void submit(const step_plan& plan) override;

  bool fail_next = false;
  int submits = 0;                   ///< submit() calls (pipelined harness)
  int placeholders = 0;              ///< k_previous_sample tokens submitted
  int max_outstanding = 0;           ///< most steps submitted and not yet collected
  int steps = 0;                     ///< step() calls, the failed one included
  std::set<seq_id> seen;             ///< every sequence that was in a plan
  std::map<seq_id, int> sampled;     ///< tokens sampled per sequence

private:
  executor_info info_;
};

/// 256 byte tokens (id = byte value) and <|endoftext|> (id 256, EOS).
model::tokenizer make_byte_tokenizer();

/// The fake publisher: publisher_actor's interface plus a message that releases the held
/// acknowledgements.
using t_release_atom = caf::atom_constant<caf::atom("t_release")>;
using fake_publisher = actors::publisher_actor::extend<caf::reacts_to<t_release_atom>>;

/// One event the fake publisher received.
struct published {
  std::string job_id;
  json event;
  schemas::wire_bytes bytes;  ///< as received (fetch replays them)
  bool terminal = false;   ///< the typed event's verdict (checked against its encoded kind)
  bool logged = true;      ///< false: p_refusal (a PUSHed job's rejection)
  bool requested = false;  ///< arrived as a (delegated) request whose reply acknowledges it
};

/// What the fake publisher records; owned by the harness, written only on the test's thread.
struct publisher_log {
  std::vector<published> events;
  bool hold = false;  ///< hold the acknowledgements of requested events until p_release
  size_t held = 0;    ///< acknowledgements held now
  bool hold_accepts = false;  ///< hold the replies to p_accept too (the `accepted` reply waits)
  std::map<std::string, schemas::wire_bytes> requests;  ///< p_accept: each job's stored request
  std::vector<std::string> cancels;                    ///< p_cancel: acknowledged cancels, in order
  std::vector<std::string> first_runs;                 ///< p_running: jobs marked running, in order
};

/// One job's logged events, as the fake publisher received them.
struct job_stream {
  std::vector<json> events;
  std::vector<token_id> token_ids;  ///< of every tokens event, in order
  std::string text;                 ///< every tokens event's text, concatenated
  size_t tokens_events = 0;
  json terminal;                    ///< the done or error event; null when none
};

/// The submit of a greedy text job (prompt "hi": two byte tokens).
schemas::submit_request make_job(const std::string& id, int32_t max_tokens, std::vector<std::string> stop = {});

struct harness_options {
  int32_t max_num_seqs = 8;
  /// The scheduler pipelines steps (x_submit / x_collect) as it does for a CUDA executor.
  bool pipelined = false;
};

class harness {
public:
  explicit harness(harness_options o = {});
  ~harness();

  // Intake side. ROUTER requests get a fresh tag (returned); PULL requests have no reply channel.
  uint64_t send(schemas::decode_result request);
  void push(schemas::decode_result request);
  uint64_t submit(const std::string& id, int32_t max_tokens, std::vector<std::string> stop = {});
  uint64_t cancel(const std::string& id);
  uint64_t status(const std::string& id);
  /// Asks the scheduler to drain (as the runtime does); each reply lands in drain_replies.
  void drain(double timeout_s);
  /// Releases every held acknowledgement (the fake publisher replies to them).
  void release();

  // Running. The executor actor is a scheduled actor like the others; settle() leaves it out.
  /// Runs every message, the executor's steps included, until nothing is left to run.
  size_t run();
  /// Runs every message except the executor's: a step already sent stays pending.
  size_t settle();
  /// Whether a step waits in the executor's mailbox.
  bool step_pending() const;
  /// settle(), one executor step (one must be pending), settle().
  void step();

  // Inspection.
  /// The replies sent to `tag`, decoded.
  std::vector<json> replies(uint64_t tag) const;
  /// Every reply sent so far, to any tag.
  size_t total_replies() const { return channel_.got.size(); }
  /// The one reply of `tag` (the test fails unless there is exactly one).
  json reply(uint64_t tag) const;
  /// The job's logged events; checks what holds for every job: seq 0, 1, ... without gaps, the
  /// first event `accepted`, at most one terminal event (done or error), nothing after it, and
  /// the publisher's `terminal` flag on it alone. `must_end`: exactly one terminal event.
  job_stream stream(const std::string& id, bool must_end = true) const;
  /// Events published without logging (PUSHed rejections) for `id`.
  std::vector<json> unlogged(const std::string& id) const;
  /// Every event, logged or not, naming `id`.
  size_t events_naming(const std::string& id) const;

  // In declaration order: what the actors point to outlives the actor system.
  model::tokenizer tok;
  actors::runtime_control control;
  actors::metrics registry;
  std::atomic<int64_t> live_requests{0};
  publisher_log log;
  std::vector<bool> drain_replies;
  std::shared_ptr<scripted_executor> ex;

private:
  class recording_channel final : public transport::reply_channel {
  public:
    void reply(uint64_t tag, schemas::reply r) override { got.emplace_back(tag, schemas::encode(r)); }
    std::vector<std::pair<uint64_t, schemas::wire_bytes>> got;
  };
  recording_channel channel_;
  uint64_t next_tag_ = 1;
  caf::actor_system_config cfg_;

public:
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  actors::executor_actor executor;
  actors::scheduler_actor scheduler;
  fake_publisher publisher;
  actors::front_actor front;

private:
  caf::resumable* executor_job_ = nullptr;
  std::vector<caf::actor> helpers_;
};

} // namespace conveyor::actor_test
