// Every actor of the runtime and every message it takes, one comment each. Read this first.
//
//   intake thread ──spawn──▶ request actor ──submit──▶ scheduler actor ──step──▶ executor actor
//        │  ▲                  ▲     │                   │  (engine::scheduler: policy, KV blocks)
//        │  └─start reply──────┘     └──publish──▶ publisher actor ◀──fetch── intake thread
//        └─cancel/status/stats──▶ scheduler            (PUB socket, per-job event logs, sys/ heartbeat)
//
// Policy lives in engine/; these actors only move values between it, the model and the sockets.
// NOTE: the KV-block allocator is not a separate actor: engine::scheduler owns the block pool
// and prefix cache, because admission and preemption need its answers synchronously inside one
// schedule() call; a separate actor would add a round trip per step and split one policy in two.
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace conveyor::actors {

using start_atom = caf::atom_constant<caf::atom("start")>;
using submit_atom = caf::atom_constant<caf::atom("submit")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using step_atom = caf::atom_constant<caf::atom("step")>;
using token_atom = caf::atom_constant<caf::atom("token")>;
using finished_atom = caf::atom_constant<caf::atom("finished")>;
using publish_atom = caf::atom_constant<caf::atom("publish")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;

/// The executor actor: detached (its own thread), owns the model and the device.
using executor_actor = caf::typed_actor<
    // scheduler -> executor: run one fused step; replies with its result, or an error when the
    // device failed (the scheduler then fails every live job and the runtime exits non-zero).
    caf::replies_to<step_atom, step_plan>::with<step_result>>;

/// The publisher actor: detached, owns the PUB socket and the retention buffer `fetch` reads.
using publisher_actor = caf::typed_actor<
    // request actor -> publisher: append one encoded event (next seq of that job) to the job's
    // log and send it on "job/<id>/". `terminal` marks the job's last event. A tokens event
    // arrives as a request delegated by the request actor; the empty reply acknowledges it to
    // the scheduler.
    caf::reacts_to<publish_atom, std::string, std::string, bool>,
    // request actor / intake -> publisher: send an event without logging it (a PULL job's
    // rejection: the job never existed, so there is nothing to fetch).
    caf::reacts_to<publish_atom, std::string, std::string>,
    // intake -> publisher: events [from_seq, from_seq + max_events) of a job, for gap repair.
    caf::replies_to<fetch_atom, std::string, int64_t, int64_t>::with<fetch_result>,
    // self, every second: publish the sys/ heartbeat and drop expired logs.
    caf::reacts_to<tick_atom>>;

/// The scheduler actor: owns engine::scheduler (queue, running set, KV blocks, prefix cache)
/// and the job-id registry; runs the schedule -> step -> update loop.
using scheduler_actor = caf::typed_actor<
    // request actor -> scheduler: queue a tokenized job; answers accepted (with its seq id) or
    // rejected (overloaded, duplicate, shutting_down, bad_request).
    caf::replies_to<submit_atom, submission>::with<submit_answer>,
    // intake -> scheduler: cancel a job by id; replies with its state afterwards ("" = unknown).
    caf::replies_to<cancel_atom, std::string>::with<job_status>,
    // request actor -> scheduler: a stop string matched; end the sequence with reason stop.
    caf::reacts_to<finish_atom, seq_id>,
    // intake -> scheduler: where a job is (state "" when the id is unknown or forgotten).
    caf::replies_to<status_atom, std::string>::with<job_status>,
    // intake / publisher / the /metrics HTTP thread -> scheduler: counters and gauges.
    caf::replies_to<stats_atom>::with<runtime_stats>,
    // self: run one iteration when idle.
    caf::reacts_to<tick_atom>,
    // main -> scheduler: refuse new jobs, let running ones finish for `timeout_s`, cancel the
    // rest; replies once nothing is live.
    caf::replies_to<drain_atom, double>::with<bool>,
    // self, `timeout_s` after drain began: cancel every job still live.
    caf::reacts_to<drain_atom>>;

/// The request actor: one per job. Tokenizes, detokenizes incrementally, checks stop strings,
/// numbers and publishes the job's events.
using request_actor = caf::typed_actor<
    // intake -> request actor: validate, tokenize and submit; replies with the scheduler's answer
    // (also for too_long / bad_request found while tokenizing).
    caf::replies_to<start_atom>::with<submit_answer>,
    // scheduler -> request actor: new tokens of this job. Sent as a request: the reply, which
    // the request actor delegates to the publisher, comes once the resulting event is on the
    // PUB socket; until then the scheduler holds the job's newer tokens (flow control).
    caf::reacts_to<token_atom, token_batch>,
    // scheduler -> request actor: the job ended; publish `done` (or `error`) and quit.
    caf::reacts_to<finished_atom, finish_info>>;

} // namespace conveyor::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::step_plan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::step_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::submission)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::submit_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::token_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::finish_info)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::fetch_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::runtime_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::actors::job_status)
