// The request actor: one per job, spawned by the front actor. Turns the job's input into prompt
// tokens (chat template for `messages`) on CAF's worker pool, never on an intake thread; submits
// it to the scheduler; answers the producer (reply, or for a PUSHed job its first event); turns
// its tokens into text deltas that never split a UTF-8 character nor show a stop string; and
// publishes the job's numbered events.
#pragma once

#include <atomic>
#include <optional>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "actors/runtime_control.hpp"
#include "model/text/chat_template.hpp"
#include "model/text/grammar.hpp"
#include "model/text/tokenizer.hpp"
#include "schemas/replay.hpp"
#include "schemas/requests.hpp"

namespace conveyor::actors {

/// What the front and request actors share; everything here outlives the actor system.
struct front_context {
  const model::tokenizer* tok = nullptr;  // read-only
  scheduler_actor sched;
  publisher_actor pub;
  metrics* registry = nullptr;  // thread-safe; null: nothing is counted
  std::string model_name;
  const std::atomic<bool>* draining = nullptr;  // set once the runtime drains (health)
  std::atomic<int64_t>* live_requests = nullptr;  // request actors alive (the drain waits for 0)
  bool journal = false;  // the journal is on: each accepted job's request goes to it
  const model::grammar_compiler* grammars = nullptr;  // structured outputs (thread-safe); null: refused
  const model::chat_template* chat = nullptr;  // renders `messages` (thread-safe); null: refused
  bool typed_events = true;  // a sink reads typed events (HTTP, NATS); false: only wire bytes go out
  const runtime_control* control = nullptr;  // once a stop is requested, new jobs are refused (null: never)
};

/// Spawns the actor for one decoded job that arrived at `arrival_s` (now_s() clock) and starts
/// it. The answer goes to `to` (a PUSHed job: `to` is fire-and-forget, and the answer is the
/// job's first event). With `resume`, a job continuing from its stored events (a restart, NATS
/// failover): it is not submitted as new (no `accepted`, no reply) but with the output its tokens
/// events carried appended to its prompt, and its events go on at `resume->next_seq`.
request_actor spawn_request(caf::actor_system& sys, schemas::submit_request job, double arrival_s, transport::reply_to to,
                            const front_context& ctx, std::optional<schemas::resume_point> resume = std::nullopt);

/// Counts a refused submit and tells the producer: an error reply, or over PULL an error event
/// on the job's topic, unless the refusal is `duplicate` (that topic belongs to the existing job)
/// or the id is empty (nobody could hear it).
void refuse_submit(const front_context& ctx, const transport::reply_to& to, const std::string& job_id, const refusal& why);

} // namespace conveyor::actors
