// Planning: schedule() and its helpers. Submit, finish and update live in
// scheduler_lifecycle.cpp.
#include "engine/scheduler.hpp"

#include <algorithm>
#include <cmath>

#include "engine/check.hpp"

namespace conveyor {

scheduler::scheduler(const scheduler_config& sched, const cache_config& cache,
                     int32_t num_kv_blocks)
    : cfg_(sched), cache_cfg_(cache),
      kv_(num_kv_blocks, cache.block_size, cache.enable_prefix_caching), waiting_(sched.policy) {
  const std::string error = validate_engine_config(sched, cache, num_kv_blocks);
  CONVEYOR_ASSERT(error.empty(), error.c_str());
  watermark_blocks_ = static_cast<int32_t>(std::floor(cache.kv_watermark * num_kv_blocks));
  if (cfg_.speculative.fixed_cost_tokens <= 0.0) cfg_.speculative.fixed_cost_tokens = default_fixed_cost_tokens;
  running_.reserve(sched.max_num_seqs);
}

scheduler::~scheduler() = default;

step_plan scheduler::schedule(double now_s) {
  CONVEYOR_ASSERT(in_flight_.size() <= 1, "schedule() with two steps awaiting update()");
  expire_deadlines(now_s);
  chosen_.clear();
  int32_t budget = cfg_.max_num_batched_tokens;
  bool preempted = false;
  schedule_running(budget, preempted);
  // NOTE: no admission in a step that had to preempt: the pool is short, and admitting now
  // would only set up the next preemption (vLLM does the same).
  if (!preempted) {
    if (cfg_.batching == batching_mode::continuous)
      admit_waiting(budget);
    else
      admit_static(budget);
  }
  add_drafts(budget);
  return build_plan();
}

void scheduler::schedule_running(int32_t& budget, bool& preempted) {
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    sequence* seq = running_[i];
    const int32_t num_new = continues_ahead(*seq) ? std::min(seq->num_known_tokens() - seq->num_planned_tokens(), budget) : 0;
    if (num_new <= 0) {
      ++i;
      continue;
    }
    bool fits = true;
    while (!kv_.allocate_slots(seq->id(), seq->num_planned_tokens() + num_new)) {
      sequence* victim = pick_victim();
      const size_t victim_index =
          std::find(running_.begin(), running_.end(), victim) - running_.begin();
      preempt(victim, budget);
      preempted = true;
      if (victim == seq) {
        fits = false;
        break;
      }
      if (victim_index < i) --i;
    }
    if (fits) {
      chosen_.push_back({seq, num_new, {}});
      budget -= num_new;
      ++i;
    }
  }
}

// A sequence whose token is still being sampled by the step in flight is planned ahead (one
// k_previous_sample token) unless that token can change what comes next: a grammar's mask and
// the penalties need it, and a token that reaches max_tokens or max_model_len ends the sequence.
bool scheduler::continues_ahead(const sequence& seq) const {
  if (seq.num_pending_samples == 0) return true;
  if (seq.num_drafts_in_flight > 0) return false;  // how many of its drafts stand is not known yet
  if (holds_for_drafts(seq)) return false;         // it drafts from its newest token: wait for it
  if (seq.req.constraint || seq.req.sampling.penalized()) return false;
  const int32_t next_len = seq.num_tokens() + seq.num_pending_samples;
  return next_len - seq.num_prompt_tokens < seq.req.stop.max_tokens && next_len < cfg_.max_model_len;
}

sequence* scheduler::pick_victim() const {
  if (cfg_.policy == scheduling_policy::fcfs) return running_.back();
  // Lowest priority (largest value), then the newest arrival, then the latest submit.
  const auto less_important = [](const sequence* a, const sequence* b) {
    if (a->req.priority != b->req.priority) return a->req.priority < b->req.priority;
    if (a->req.arrival_time_s != b->req.arrival_time_s)
      return a->req.arrival_time_s < b->req.arrival_time_s;
    return a->serial < b->serial;
  };
  return *std::max_element(running_.begin(), running_.end(), less_important);
}

void scheduler::preempt(sequence* victim, int32_t& budget) {
  auto chosen = std::find_if(chosen_.begin(), chosen_.end(),
                             [victim](const chosen_seq& c) { return c.seq == victim; });
  if (chosen != chosen_.end()) {
    budget += chosen->num_new;
    chosen_.erase(chosen);
  }
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  kv_.free(victim->id());
  victim->num_computed_tokens = 0;
  victim->num_ahead_tokens = 0;  // a step in flight computes it for nothing (its sample still counts)
  victim->prompt_scores_filed = 0;  // its recompute scores the prompt again
  victim->status = seq_status::waiting;
  ++victim->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(victim);
  num_queued_tokens_ += victim->num_tokens();
}

void scheduler::admit_waiting(int32_t& budget) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < cfg_.max_num_seqs) {
    // FCFS head-of-line: when the head does not fit, nothing behind it is tried.
    if (!try_admit(waiting_.front(), budget, /*num_reserved_slots=*/0)) break;
  }
}

void scheduler::admit_static(int32_t& budget) {
  if (static_batch_size_ > 0) return; // a batch is running: nothing new until it is over
  // Form the next batch from the queue head: as many jobs as max_num_seqs and the pool allow,
  // each reserving blocks for its whole life (prompt + max_tokens, at most max_model_len), as
  // static batchers do. Members therefore never run out of blocks and are never preempted;
  // the token budget only paces their prefill over the following steps.
  while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_num_seqs) {
    sequence* seq = waiting_.front();
    const int64_t life = int64_t{seq->num_prompt_tokens} + seq->req.stop.max_tokens;
    const int32_t num_slots = static_cast<int32_t>(std::min<int64_t>(life, cfg_.max_model_len));
    if (!try_admit(seq, budget, num_slots)) break;
    seq->in_static_batch = true;
    ++static_batch_size_;
  }
}

bool scheduler::try_admit(sequence* seq, int32_t& budget, int32_t num_reserved_slots) {
  // A sequence preempted while a step samples its next token is waiting for that token; it is
  // never tried before: a plan that preempts admits nothing, and the next plan comes after the
  // step's update().
  CONVEYOR_ASSERT(seq->num_pending_samples == 0, "admitting a sequence whose token is still being sampled");
  // A prompt to score is computed whole: cached blocks would skip its rows.
  const prefix_hit hit = seq->scores_prompt() ? prefix_hit{} : kv_.find_cached_prefix(seq->tokens);
  const int32_t num_new = std::min(seq->num_tokens() - hit.num_tokens, budget);
  const int32_t num_slots = std::max(hit.num_tokens + num_new, num_reserved_slots);
  // The watermark only guards running sequences; an empty engine may use the whole pool.
  const bool others = !running_.empty() || !chosen_.empty();
  const int32_t reserved = others ? watermark_blocks_ : 0;
  if (!kv_.allocate_slots(seq->id(), num_slots, &hit, reserved)) return false;

  waiting_.erase(seq);
  num_queued_tokens_ -= seq->num_tokens();
  seq->num_computed_tokens = hit.num_tokens;
  if (!seq->admitted_once) {
    seq->admitted_once = true;
    seq->num_cached_tokens = hit.num_tokens;
    num_prefix_query_tokens_ += seq->num_prompt_tokens;
    num_prefix_hit_tokens_ += hit.num_tokens;
  }
  seq->status = seq_status::running;
  running_.push_back(seq);
  if (num_new > 0) {
    chosen_.push_back({seq, num_new, {}});
    budget -= num_new;
  }
  return true;
}

step_plan scheduler::build_plan() {
  step_plan plan;
  if (chosen_.empty()) return plan;
  plan.step_id = next_step_id_++;
  plan.seqs.reserve(chosen_.size());
  flight& f = in_flight_.emplace_back();
  f.step_id = plan.step_id;
  f.seqs.reserve(chosen_.size());
  for (const chosen_seq& c : chosen_) {
    sequence* seq = c.seq;
    const int32_t begin = seq->num_planned_tokens(), end = begin + c.num_new;
    scheduled_seq& s = plan.seqs.emplace_back();
    s.id = seq->id();
    s.num_computed_tokens = begin;
    const int32_t known_end = std::min(end, seq->num_tokens());
    if (begin < known_end) s.tokens.assign(seq->tokens.begin() + begin, seq->tokens.begin() + known_end);
    const auto num_drafts = static_cast<int32_t>(c.drafts.size());
    s.tokens.resize(static_cast<size_t>(c.num_new - num_drafts), k_previous_sample);  // at most one: the token in flight
    s.tokens.insert(s.tokens.end(), c.drafts.begin(), c.drafts.end());
    s.block_table = kv_.block_table(seq->id());
    s.sample = end - num_drafts == seq->num_known_tokens();
    s.num_drafts = num_drafts;
    s.num_prompt_tokens = seq->num_prompt_tokens;
    seq->num_drafts_in_flight = num_drafts;
    s.sampling = seq->req.sampling;
    if (s.sample) {
      s.constraint = seq->req.constraint;
      if (s.sampling.edits_logits()) {
        // Penalized sequences are never planned ahead, so their tokens are all known here (a
        // logit_bias alone reads none). A resumed job's earlier output ends its prompt.
        const std::span<const token_id> all(seq->tokens.data(), std::min(static_cast<size_t>(end), seq->tokens.size()));
        const size_t output_begin = static_cast<size_t>(seq->num_prompt_tokens - seq->req.resumed_output);
        const auto through = static_cast<size_t>(seq->edits_through);
        if (seq->edits_through < 0 || through < output_begin || through > all.size())  // first sample (or tokens taken back)
          make_logit_edits(s.sampling, all.first(output_begin), all.subspan(output_begin), seq->edits);
        else  // the tokens sampled since
          extend_logit_edits(s.sampling, all.subspan(through), seq->edits);
        seq->edits_through = static_cast<int32_t>(all.size());
        s.logit_edits = seq->edits;
      }
    }
    // Prompt logprobs: each row before the prompt's last scores the prompt token after it.
    const int32_t num_scored = seq->scores_prompt() ? std::max(0, std::min(end, seq->num_prompt_tokens - 1) - begin) : 0;
    if (num_scored > 0) {
      s.prompt_targets.assign(seq->tokens.begin() + begin + 1, seq->tokens.begin() + begin + 1 + num_scored);
      s.prompt_top = seq->req.prompt_logprobs;
    }
    seq->num_ahead_tokens += c.num_new;
    seq->num_pending_samples += s.sample ? 1 : 0;
    f.seqs.push_back({seq, seq->id(), c.num_new, s.sample, /*live=*/true, seq->num_preemptions, begin, num_scored, c.drafts});
  }
  return plan;
}

} // namespace conveyor
