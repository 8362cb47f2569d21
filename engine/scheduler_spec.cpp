// Speculative decoding in the scheduler (engine/speculation.hpp has the rule): drafts are added
// to decodes once the step is otherwise planned, from the token budget left over and from free
// blocks beyond the watermark (a draft never preempts, nor delays a prompt); after the step, the
// sampled tokens that match the drafts stand and the slots of the rest are released.
#include <algorithm>

#include "engine/check.hpp"
#include "engine/scheduler.hpp"

namespace conveyor {

// A decode of the sequence's newest token with nothing of it in flight and no prompt still to
// score. (Penalties and grammars follow the drafts: the executor edits and masks each verifying
// row as if the drafts before it stood.)
bool scheduler::may_draft(const sequence& seq, const chosen_seq& c) const {
  return seq.req.speculate && c.num_new == 1 && c.drafts.empty() && seq.num_pending_samples == 0 &&
         seq.num_planned_tokens() + 1 == seq.num_tokens() && !seq.scores_prompt();
}

// Planning a sequence ahead (pipelined steps: its token still being sampled) rules out drafting
// for it, since drafts continue the newest token. A sequence whose last try drafted, or that is
// due to try again, waits for its token instead: a verification buys more than hiding the host's
// planning behind the step. One whose last try found nothing to draft runs ahead, and those
// steps count towards its retry.
bool scheduler::holds_for_drafts(const sequence& seq) const {
  return cfg_.speculative.enabled() && seq.req.speculate && !seq.scores_prompt() &&
         (seq.spec.idle_steps == 0 || seq.spec.idle_steps >= spec_retry_steps);
}

void scheduler::add_drafts(int32_t& budget) {
  const speculative_config& spec = cfg_.speculative;
  if (!spec.enabled() || chosen_.empty()) return;
  int32_t num_sampling = 0;
  for (const chosen_seq& c : chosen_)
    if (c.seq->num_planned_tokens() + c.num_new == c.seq->num_known_tokens()) ++num_sampling;
  const double threshold = draft_threshold(spec.fixed_cost_tokens, num_sampling);
  for (chosen_seq& c : chosen_) {
    if (budget <= 0) break;
    sequence& seq = *c.seq;
    if (!may_draft(seq, c)) {
      if (seq.num_pending_samples > 0 && seq.req.speculate) ++seq.spec.idle_steps;  // planned ahead: no try
      continue;
    }
    // Never past max_tokens or max_model_len: every drafted token could stand.
    const int32_t room = std::min({spec.num_speculative_tokens, budget, seq.req.stop.max_tokens - seq.num_output_tokens() - 1,
                                   cfg_.max_model_len - seq.num_tokens() - 1});
    const int32_t want = draft_budget(seq.spec, room, threshold);
    int32_t n = 0;
    if (want > 0 && spec.method == spec_method::draft_model) {
      n = std::min(want, spec.draft->propose(seq.id(), seq.tokens, want, proposal_));
      proposal_.resize(static_cast<size_t>(std::max(n, 0)));
    } else if (want > 0) {
      n = propose_ngram(seq.spec_index, seq.tokens, spec.prompt_lookup_min, spec.prompt_lookup_max, want, proposal_);
    }
    if (n > 0 && seq.req.constraint) {
      n = grammar_prefix(*seq.req.constraint, proposal_);  // the grammar's own prefix of it
      proposal_.resize(static_cast<size_t>(n));
    }
    if (n == 0) {
      ++seq.spec.idle_steps;
      continue;
    }
    if (!kv_.allocate_slots(seq.id(), seq.num_planned_tokens() + 1 + n, nullptr, watermark_blocks_)) continue;
    c.drafts = proposal_;
    c.num_new += n;
    budget -= n;
  }
}

// The verified step of a drafted sequence: how many sampled tokens stand (1 + the drafts
// matched in order), its record and the counters; the KV of the standing tokens is kept, the
// slots past them are given back, and no rejected token reaches the prefix cache.
int32_t scheduler::keep_verified(const in_flight_seq& f, std::span<const sampled_token> sampled) {
  sequence* seq = f.seq;
  seq->num_drafts_in_flight = 0;
  const auto num_drafts = static_cast<int32_t>(f.drafts.size());
  CONVEYOR_ASSERT(sampled.size() == f.drafts.size() + 1, "a drafted sequence's rows are not all sampled");
  int32_t accepted = 0;
  while (accepted < num_drafts && sampled[static_cast<size_t>(accepted)].token == f.drafts[static_cast<size_t>(accepted)]) ++accepted;
  seq->spec.record(num_drafts, accepted);
  ++num_spec_drafts_;
  num_spec_draft_tokens_ += num_drafts;
  num_spec_accepted_tokens_ += accepted;
  if (num_spec_accepted_per_pos_.size() < f.drafts.size()) num_spec_accepted_per_pos_.resize(f.drafts.size(), 0);
  for (int32_t i = 0; i < accepted; ++i) ++num_spec_accepted_per_pos_[static_cast<size_t>(i)];
  if (seq->num_preemptions == f.epoch) {
    // The prefix cache takes the full blocks once the tokens are appended (apply()).
    seq->num_computed_tokens += f.num_new - num_drafts + accepted;
    seq->num_ahead_tokens -= f.num_new;
    if (!seq->in_static_batch) kv_.shrink(seq->id(), seq->num_computed_tokens + 1);  // a static member keeps its reservation
  }
  return accepted + 1;
}

} // namespace conveyor
