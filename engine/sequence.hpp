// Pure. The scheduler's per-job state. Lifecycle:
//
//   submit ──▶ waiting ──admit──▶ running ──stop/length──▶ finished
//                 ▲                  │ (cancel / deadline / finish(): from waiting or running)
//                 └───preempt────────┘  blocks freed, num_computed_tokens = 0 (recompute)
//
// There is no prefill or decode phase: a sequence has `tokens` (prompt, then every sampled
// token) and `num_computed_tokens` (how many of them are in the KV cache); each step computes
// some of the rest. A decode is simply the case where one token is left.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/logit_edits.hpp"
#include "engine/request.hpp"
#include "engine/speculation.hpp"
#include "engine/step.hpp"
#include "engine/types.hpp"

namespace conveyor {

enum class seq_status { waiting, running, finished };

/// Position of a sequence in the waiting queue: smaller keys come first.
struct queue_key {
  int64_t rank = 0;   // fcfs: 0; priority: the request's priority
  double arrival_s = 0.0; // fcfs: 0; priority: arrival time
  int64_t order = 0;  // fcfs: queue position (negative when pushed to the front); priority: serial
  auto operator<=>(const queue_key&) const = default;
};

struct sequence {
  /// The job as submitted (its prompt lives in `tokens`; req.prompt_token_ids is emptied).
  request req;
  /// Submit order, unique over the scheduler's life: tells reused seq ids apart.
  uint64_t serial = 0;
  seq_status status = seq_status::waiting;
  /// Prompt, then every sampled token.
  std::vector<token_id> tokens;
  int32_t num_prompt_tokens = 0;
  /// Tokens of `tokens` whose KV is in the cache.
  int32_t num_computed_tokens = 0;
  /// Pipelined steps (scheduler::schedule with a step in flight): tokens planned in steps whose
  /// results are not in yet, past num_computed_tokens; and how many of those steps sample a token
  /// for it (tokens not yet appended: the next plan may carry k_previous_sample for one).
  int32_t num_ahead_tokens = 0;
  int32_t num_pending_samples = 0;
  /// Prompt tokens served from the prefix cache at first admission (usage.cached_tokens).
  int32_t num_cached_tokens = 0;
  bool admitted_once = false;
  int32_t num_preemptions = 0;
  /// Where it sits in the waiting queue while waiting.
  queue_key key;
  /// Static batching: a member of the batch now running.
  bool in_static_batch = false;
  /// Penalized or biased sampling: the logit edits (engine/logit_edits.hpp) for tokens[0,
  /// edits_through), extended as tokens arrive rather than rebuilt each step (-1: not built).
  std::vector<logit_edit> edits;
  int32_t edits_through = -1;
  /// Prompt logprobs: entry p scores the prompt token at position p + 1 (filled as chunks are
  /// computed, again after a preemption), sent with the first output token appended once all
  /// are filed (a preemption voiding a step in flight can leave them short: then a later one).
  std::vector<sampled_token> prompt_scores;
  int32_t prompt_scores_filed = 0;  // since the last preemption
  bool prompt_scores_sent = false;
  /// Speculative decoding: its record of verified drafts, and the drafts the step in flight
  /// verifies (its next plan waits for that step: how many stand is not known before).
  spec_history spec;
  int32_t num_drafts_in_flight = 0;
  /// Prompt lookup's index of its tokens, built at its first lookup and extended at each.
  ngram_index spec_index;

  seq_id id() const { return req.id; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  /// Where the next plan starts, and how many tokens it may cover, counting steps in flight.
  int32_t num_planned_tokens() const { return num_computed_tokens + num_ahead_tokens; }
  int32_t num_known_tokens() const { return num_tokens() + num_pending_samples; }
  /// Its prompt is still to be scored (request::prompt_logprobs).
  bool scores_prompt() const { return req.prompt_logprobs >= 0 && !prompt_scores_sent; }
};

} // namespace conveyor
