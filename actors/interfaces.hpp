// Every actor of the runtime and every message it takes, one comment each. Read this first.
//
//   intakes ──inbound──▶ front actor ──spawn, start──▶ request actor ──submit──▶ scheduler actor ──step──▶ executor
//   (ROUTER, PULL:           │ cancel/status/stats ─────────────────────────────▶   │ (engine::job_table)
//    decode, never block)    │ fetch ──▶ publisher ◀──event── request actor ◀──tokens, end──┘
//   replies go back through the intake's reply channel, sent on the socket's own thread.
//
// Policy lives in engine/ (job_table: admission, ids, states, flow control; scheduler: steps,
// KV blocks); these actors only move values between it, the model and the sockets.
// Atom names start with the receiver: f_ front, r_ request, s_ scheduler, x_ executor,
// p_ publisher.
// NOTE: the KV-block allocator is not a separate actor: engine::scheduler owns the block pool
// and prefix cache, because admission and preemption need its answers synchronously inside one
// schedule() call; a separate actor would add a round trip per step and split one policy in two.
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace conveyor::actors {

using f_inbound_atom = caf::atom_constant<caf::atom("f_inbound")>;
using r_start_atom = caf::atom_constant<caf::atom("r_start")>;
using r_tokens_atom = caf::atom_constant<caf::atom("r_tokens")>;
using r_end_atom = caf::atom_constant<caf::atom("r_end")>;
using s_submit_atom = caf::atom_constant<caf::atom("s_submit")>;
using s_cancel_atom = caf::atom_constant<caf::atom("s_cancel")>;
using s_stop_atom = caf::atom_constant<caf::atom("s_stop")>;
using s_status_atom = caf::atom_constant<caf::atom("s_status")>;
using s_stats_atom = caf::atom_constant<caf::atom("s_stats")>;
using s_tick_atom = caf::atom_constant<caf::atom("s_tick")>;
using s_drain_atom = caf::atom_constant<caf::atom("s_drain")>;
using s_drained_atom = caf::atom_constant<caf::atom("s_drainend")>;
using x_step_atom = caf::atom_constant<caf::atom("x_step")>;
using x_submit_atom = caf::atom_constant<caf::atom("x_submit")>;
using x_collect_atom = caf::atom_constant<caf::atom("x_collect")>;
using p_event_atom = caf::atom_constant<caf::atom("p_event")>;
using p_fetch_atom = caf::atom_constant<caf::atom("p_fetch")>;
using p_tick_atom = caf::atom_constant<caf::atom("p_tick")>;
using p_accept_atom = caf::atom_constant<caf::atom("p_accept")>;
using p_running_atom = caf::atom_constant<caf::atom("p_running")>;
using p_flush_atom = caf::atom_constant<caf::atom("p_flush")>;
using p_cancel_atom = caf::atom_constant<caf::atom("p_cancel")>;
using s_journal_atom = caf::atom_constant<caf::atom("s_journal")>;
using p_refusal_atom = caf::atom_constant<caf::atom("p_refusal")>;

/// The executor actor: detached (its own thread), owns the model and the device.
using executor_actor = caf::typed_actor<
    // scheduler -> executor: run one fused step; replies with its result, or an error when the
    // device failed (the scheduler then fails every live job and the runtime exits non-zero).
    caf::replies_to<x_step_atom, step_plan>::with<step_result>,
    // Pipelined steps (async scheduling, engine/executor.hpp): start a step (replies with its
    // step id once it is queued on the device) ...
    caf::replies_to<x_submit_atom, step_plan>::with<uint64_t>,
    // ... and wait for the oldest one started and not yet collected.
    caf::replies_to<x_collect_atom>::with<step_result>>;

/// The publisher actor: detached, the only caller of the event sinks (the PUB socket, NATS, the
/// HTTP watches), owner of the retention buffer `fetch` reads and, when on, of the job journal
/// (write-ahead: an event goes out only once committed; the events that arrive together are
/// committed together, see publisher_actor.hpp).
using publisher_actor = caf::typed_actor<
    // request actor -> publisher: a job was admitted: store its request (the submit map, seed
    // resolved; arrival in Unix seconds) with its `accepted` event (seq 0), then send that
    // event; the reply (after the commit) lets the request actor answer the producer.
    caf::replies_to<p_accept_atom, schemas::wire_bytes, double, schemas::published_event>::with<void>,
    // scheduler -> publisher: these jobs are about to run for the first time in this
    // incarnation; the reply comes once that is stored (a job running in N consecutive crashes
    // is a poison job at the next start).
    caf::replies_to<p_running_atom, std::vector<std::string>>::with<void>,
    // front actor -> publisher: the scheduler cancelled this job; the reply comes once that is
    // stored (after a crash the job then ends as cancelled instead of resuming), so an
    // acknowledged cancel holds.
    caf::replies_to<p_cancel_atom, std::string>::with<void>,
    // self: commit what arrived since the last flush, then send it and acknowledge it.
    caf::reacts_to<p_flush_atom>,
    // request actor -> publisher: append one event (next seq of that job, typed and encoded) to
    // the job's log and hand it to every sink (PUB: "job/<id>/"). A done or error event is the
    // job's last. A tokens event arrives as a request delegated by the request actor; the empty
    // reply acknowledges it to the scheduler.
    caf::reacts_to<p_event_atom, schemas::published_event>,
    // request / front actor -> publisher: send an event without logging it (a PUSHed job's
    // rejection: the job never existed, so there is nothing to fetch).
    caf::reacts_to<p_refusal_atom, schemas::published_event>,
    // front actor -> publisher: events [from_seq, from_seq + max_events) of a job.
    caf::replies_to<p_fetch_atom, std::string, int64_t, int64_t>::with<fetch_result>,
    // self, every heartbeat period: publish the sys/ heartbeat and drop expired logs.
    caf::reacts_to<p_tick_atom>>;

/// The scheduler actor: owns engine::job_table (and through it the scheduler, KV blocks and
/// prefix cache); runs the schedule -> step -> update loop.
using scheduler_actor = caf::typed_actor<
    // request / front actor -> scheduler: admit a job; answers its seq id or the refusal.
    caf::replies_to<s_submit_atom, submission>::with<submit_answer>,
    // front actor -> scheduler: cancel a job by id; replies with its state afterwards.
    caf::replies_to<s_cancel_atom, std::string>::with<job_status>,
    // request actor -> scheduler: a stop string matched; end the sequence with reason stop.
    caf::reacts_to<s_stop_atom, seq_id>,
    // front actor -> scheduler: where a job is.
    caf::replies_to<s_status_atom, std::string>::with<job_status>,
    // front / publisher / the /metrics thread -> scheduler: counters and gauges.
    caf::replies_to<s_stats_atom>::with<serving_stats>,
    // self: run one iteration when idle.
    caf::reacts_to<s_tick_atom>,
    // runtime -> scheduler, once at start when the journal is on: mark each job's first run
    // with this publisher (p_running) before the step that runs it.
    caf::reacts_to<s_journal_atom, publisher_actor>,
    // runtime -> scheduler: refuse new jobs, let live ones finish for `timeout_s`, cancel the
    // rest; replies once nothing is live.
    caf::replies_to<s_drain_atom, double>::with<bool>,
    // self, `timeout_s` after the drain began: cancel every job still live.
    caf::reacts_to<s_drained_atom>>;

/// The request actor: one per job. Tokenizes, answers the submit, detokenizes incrementally,
/// checks stop strings, numbers and publishes the job's events.
using request_actor = caf::typed_actor<
    // front actor -> request actor: tokenize, submit to the scheduler, answer the producer.
    caf::reacts_to<r_start_atom>,
    // scheduler -> request actor: new tokens of this job. Sent as a request: the reply, which
    // the request actor delegates to the publisher, comes once the resulting event is on the
    // PUB socket; until then the job table holds the job's newer tokens (flow control).
    caf::reacts_to<r_tokens_atom, token_batch>,
    // scheduler -> request actor: the job ended; publish `done` (or `error`) and quit.
    caf::reacts_to<r_end_atom, job_end>>;

/// The front actor: one, stateless; takes every request an intake delivers and answers it
/// (spawning a request actor per submit) without ever blocking an intake thread.
using front_actor = caf::typed_actor<caf::reacts_to<f_inbound_atom, inbound>>;

} // namespace conveyor::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::step_plan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::step_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::token_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::job_end)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::serving_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::inbound)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::submission)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::submit_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::fetch_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::job_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::schemas::published_event)
