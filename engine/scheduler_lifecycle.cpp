// A job's way in and out: submit, cancel/finish, deadlines, update() after a step, stats and
// invariants. Planning lives in scheduler.cpp.
#include <algorithm>

#include "engine/check.hpp"
#include "engine/scheduler.hpp"
#include "engine/stop_check.hpp"

namespace conveyor {

namespace {

submit_result rejected(error_code reason, std::string message) {
  return {false, reason, std::move(message)};
}

} // namespace

submit_result scheduler::submit(request req, double now_s) {
  const int32_t prompt_len = static_cast<int32_t>(req.prompt_token_ids.size());
  if (seqs_.count(req.id) != 0)
    return rejected(error_code::duplicate, "seq " + std::to_string(req.id) + " is live");
  if (prompt_len == 0) return rejected(error_code::bad_request, "the prompt is empty");
  if (prompt_len >= cfg_.max_model_len)
    return rejected(error_code::too_long, "prompt: " + std::to_string(prompt_len) +
                                                 " tokens; this server's max_model_len is " +
                                                 std::to_string(cfg_.max_model_len) +
                                                 " (prompt + output); shorten the prompt");
  if (auto e = req.stop.validate(); !e.empty()) return rejected(error_code::bad_request, e);
  if (auto e = req.sampling.validate(); !e.empty()) return rejected(error_code::bad_request, e);
  if (req.prompt_logprobs < -1 || req.prompt_logprobs > max_top_logprobs)
    return rejected(error_code::bad_request, "prompt_logprobs must be in [0, " + std::to_string(max_top_logprobs) + "]");
  if (req.prompt_logprobs >= 0 && !cfg_.no_prompt_logprobs_on.empty())
    return rejected(error_code::bad_request, "prompt_logprobs: the " + cfg_.no_prompt_logprobs_on +
                                                 " executor does not score prompts; serve with --device cpu or cuda for them");
  if (cfg_.max_num_queued_reqs && static_cast<int64_t>(waiting_.size()) >= *cfg_.max_num_queued_reqs)
    return rejected(error_code::overloaded,
                    "the queue holds max_num_queued_reqs = " +
                        std::to_string(*cfg_.max_num_queued_reqs) + " jobs; retry later");
  if (cfg_.max_num_queued_tokens && num_queued_tokens_ + prompt_len > *cfg_.max_num_queued_tokens)
    return rejected(error_code::overloaded,
                    "the queue would exceed max_num_queued_tokens = " +
                        std::to_string(*cfg_.max_num_queued_tokens) + "; retry later");

  auto owned = std::make_unique<sequence>();
  sequence* seq = owned.get();
  seq->serial = next_serial_++;
  seq->tokens = std::move(req.prompt_token_ids);
  seq->num_prompt_tokens = prompt_len;
  seq->req = std::move(req);
  seq->req.prompt_token_ids.clear();
  seqs_.emplace(seq->id(), std::move(owned));
  waiting_.push_back(seq);
  num_queued_tokens_ += prompt_len;
  if (seq->req.deadline_s) {
    deadlines_.emplace(*seq->req.deadline_s, seq->id());
    if (*seq->req.deadline_s <= now_s) expire_deadlines(now_s);
  }
  return {};
}

bool scheduler::cancel(seq_id id) { return finish(id, finish_reason::cancelled); }

bool scheduler::finish(seq_id id, finish_reason reason) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  remove_live(it->second.get(), reason);
  return true;
}

void scheduler::expire_deadlines(double now_s) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now_s) {
    auto it = seqs_.find(deadlines_.begin()->second);
    CONVEYOR_ASSERT(it != seqs_.end(), "a deadline outlived its sequence");
    remove_live(it->second.get(), finish_reason::deadline);
  }
}

void scheduler::remove_live(sequence* seq, finish_reason reason) {
  if (seq->status == seq_status::waiting) {
    waiting_.erase(seq);
    num_queued_tokens_ -= seq->num_tokens();
  } else {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  }
  forget_in_flight(seq);
  const seq_id id = seq->id();
  retire(seq, reason);
  seqs_.erase(id);
}

void scheduler::retire(sequence* seq, finish_reason reason) {
  kv_.free(seq->id());
  if (cfg_.speculative.draft) cfg_.speculative.draft->release(seq->id());
  if (seq->req.deadline_s) deadlines_.erase({*seq->req.deadline_s, seq->id()});
  if (seq->in_static_batch) --static_batch_size_;
  seq->status = seq_status::finished;
  seq_event e;
  e.kind = event_kind::finished;
  e.id = seq->id();
  e.reason = reason;
  e.num_prompt_tokens = seq->num_prompt_tokens;
  e.num_output_tokens = seq->num_output_tokens();
  e.num_cached_tokens = seq->num_cached_tokens;
  outbox_.push_back(e);
}

// Steps in flight drop their work for a sequence that is gone (its id may be reused at once).
void scheduler::forget_in_flight(const sequence* seq) {
  for (flight& fl : in_flight_)
    for (in_flight_seq& f : fl.seqs)
      if (f.seq == seq) f.live = false;
}

std::vector<seq_event> scheduler::update(const step_result& result, double /*now_s*/) {
  CONVEYOR_ASSERT(!in_flight_.empty(), "update() without a step in flight");
  CONVEYOR_ASSERT(result.step_id == in_flight_.front().step_id, "update() for a different step");
  const flight done = std::move(in_flight_.front());
  in_flight_.pop_front();
  size_t k = 0, scored = 0;
  bool any_finished = false;
  for (const in_flight_seq& f : done.seqs) {
    std::span<const sampled_token> sampled;
    if (f.sample) {
      const size_t n = 1 + f.drafts.size();
      CONVEYOR_ASSERT(k + n <= result.sampled.size(), "step result lacks a sampled token");
      sampled = std::span<const sampled_token>(result.sampled).subspan(k, n);
      for (const sampled_token& t : sampled) CONVEYOR_ASSERT(t.id == f.id, "step result out of plan order");
      k += n;
    }
    CONVEYOR_ASSERT(scored + f.num_scored <= result.prompt_scores.size(), "step result lacks prompt scores");
    const std::span<const sampled_token> scores(result.prompt_scores.data() + scored, static_cast<size_t>(f.num_scored));
    scored += static_cast<size_t>(f.num_scored);
    if (f.live) apply(f, sampled, scores, any_finished);  // not live: cancelled or ended while the step ran
  }
  CONVEYOR_ASSERT(k == result.sampled.size(), "step result has extra sampled tokens");
  CONVEYOR_ASSERT(scored == result.prompt_scores.size(), "step result has extra prompt scores");
  if (any_finished) {
    std::vector<seq_id> done_ids;
    auto keep = std::remove_if(running_.begin(), running_.end(), [&done_ids](sequence* s) {
      if (s->status != seq_status::finished) return false;
      done_ids.push_back(s->id());
      return true;
    });
    running_.erase(keep, running_.end());
    for (seq_id id : done_ids) seqs_.erase(id);
  }
  return take_events();
}

// One sequence's share of a finished step. Preempted since it was planned (a pipelined plan may
// preempt a sequence of the step in flight): its KV work is void, its sampled tokens still stand.
// Drafted: the sampled tokens up to the first that differs from its draft stand (keep_verified).
void scheduler::apply(const in_flight_seq& f, std::span<const sampled_token> sampled, std::span<const sampled_token> scores,
                      bool& any_finished) {
  sequence* seq = f.seq;
  if (seq->num_preemptions == f.epoch && !scores.empty() && seq->scores_prompt()) {
    if (seq->prompt_scores.empty()) seq->prompt_scores.resize(static_cast<size_t>(seq->num_prompt_tokens - 1));
    for (size_t i = 0; i < scores.size(); ++i) {
      CONVEYOR_ASSERT(scores[i].id == f.id, "prompt scores out of plan order");
      seq->prompt_scores[static_cast<size_t>(f.begin) + i] = scores[i];
    }
    seq->prompt_scores_filed += static_cast<int32_t>(scores.size());
  }
  const int32_t num_kept = f.drafts.empty() ? static_cast<int32_t>(sampled.size()) : keep_verified(f, sampled);
  if (seq->num_preemptions == f.epoch && f.drafts.empty()) {
    const int32_t bs = kv_.block_size();
    const bool fills_a_block = seq->num_computed_tokens / bs != (seq->num_computed_tokens + f.num_new) / bs;
    seq->num_computed_tokens += f.num_new;
    seq->num_ahead_tokens -= f.num_new;
    if (fills_a_block) kv_.cache_blocks(seq->id(), seq->tokens, seq->num_computed_tokens);
  }
  if (sampled.empty()) return;
  --seq->num_pending_samples;
  for (int32_t i = 0; i < num_kept; ++i)
    if (append_token(seq, sampled[static_cast<size_t>(i)], any_finished)) return;
  // Drafted: its accepted drafts are among the tokens just appended, so the blocks they fill
  // can be registered now (nothing new to register is a no-op).
  if (!f.drafts.empty() && seq->num_preemptions == f.epoch) kv_.cache_blocks(seq->id(), seq->tokens, seq->num_computed_tokens);
}

// Appends one sampled token, reports it and runs the stop checks. Returns true when the sequence
// ended (its later tokens, if any, are dropped).
bool scheduler::append_token(sequence* seq, const sampled_token& sampled, bool& any_finished) {
  seq->tokens.push_back(sampled.token);
  if (seq->status == seq_status::waiting) ++num_queued_tokens_;
  seq_event e;
  e.kind = event_kind::token;
  e.id = seq->id();
  e.token = sampled.token;
  e.logprob = sampled.logprob;
  e.top = sampled.top;
  if (seq->scores_prompt() && seq->prompt_scores_filed == seq->num_prompt_tokens - 1) {  // all scored
    e.prompt = std::move(seq->prompt_scores);
    seq->prompt_scores = {};
    seq->prompt_scores_sent = true;
  }
  outbox_.push_back(std::move(e));
  // A constrained sequence ends once its grammar is complete (or, were the mask ignored, when
  // the grammar refuses the token: nothing valid can follow).
  bool grammar_ended = false;
  if (token_constraint* g = seq->req.constraint.get()) grammar_ended = !g->accept(sampled.token) || g->terminated();
  std::optional<finish_reason> reason = check_stop(*seq, cfg_.max_model_len);
  if (!reason && grammar_ended) reason = finish_reason::stop;
  if (!reason) return false;
  if (seq->status == seq_status::waiting) {
    remove_live(seq, *reason);  // preempted meanwhile: leaves the queue (and seqs_) at once
    return true;
  }
  retire(seq, *reason);
  forget_in_flight(seq);  // the next step's token for it, if planned, is dropped
  any_finished = true;
  return true;
}

std::vector<seq_event> scheduler::take_events() {
  std::vector<seq_event> out;
  out.swap(outbox_);
  return out;
}

const sequence* scheduler::find(seq_id id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

scheduler_stats scheduler::stats() const {
  scheduler_stats s;
  s.num_waiting = static_cast<int32_t>(waiting_.size());
  s.num_running = static_cast<int32_t>(running_.size());
  s.num_queued_tokens = num_queued_tokens_;
  s.num_kv_blocks = kv_.num_blocks();
  s.num_kv_blocks_used = kv_.num_used_blocks();
  s.num_kv_blocks_free = kv_.num_free_blocks();
  for (const sequence* seq : running_) s.num_live_kv_tokens += seq->num_computed_tokens;
  s.num_allocated_kv_slots = kv_.num_table_blocks() * kv_.block_size();
  s.num_preemptions = num_preemptions_;
  s.num_prefix_query_tokens = num_prefix_query_tokens_;
  s.num_prefix_hit_tokens = num_prefix_hit_tokens_;
  s.num_spec_drafts = num_spec_drafts_;
  s.num_spec_draft_tokens = num_spec_draft_tokens_;
  s.num_spec_accepted_tokens = num_spec_accepted_tokens_;
  s.num_spec_accepted_per_pos = num_spec_accepted_per_pos_;
  return s;
}

std::string scheduler::check_invariants() const {
  if (auto e = kv_.check_invariants(); !e.empty()) return e;
  if (static_cast<int32_t>(running_.size()) > cfg_.max_num_seqs) return "running > max_num_seqs";
  if (running_.size() + waiting_.size() != seqs_.size())
    return "live sequences are not exactly waiting + running";
  int32_t members = 0;
  for (const sequence* seq : running_) {
    const std::string id = "running seq " + std::to_string(seq->id());
    if (seq->status != seq_status::running) return id + " does not have status running";
    const int64_t slots = int64_t{static_cast<int64_t>(kv_.block_table(seq->id()).size())} *
                          kv_.block_size();
    if (slots < seq->num_planned_tokens()) return id + ": block table shorter than its KV";
    if (seq->num_planned_tokens() > seq->num_known_tokens() + seq->num_drafts_in_flight) return id + ": computed past tokens";
    if (seq->num_ahead_tokens < 0 || seq->num_pending_samples < 0 || seq->num_pending_samples > 2)
      return id + ": steps in flight out of step";
    members += seq->in_static_batch ? 1 : 0;
  }
  int64_t queued = 0;
  for (const auto& [key, seq] : waiting_) {
    const std::string id = "waiting seq " + std::to_string(seq->id());
    if (seq->status != seq_status::waiting) return id + " does not have status waiting";
    if (!kv_.block_table(seq->id()).empty() || seq->num_computed_tokens != 0 || seq->num_ahead_tokens != 0)
      return id + " holds KV blocks";
    queued += seq->num_tokens();
    members += seq->in_static_batch ? 1 : 0;
  }
  if (queued != num_queued_tokens_) return "num_queued_tokens is out of step with the queue";
  if (members != static_batch_size_) return "static batch size is out of step with its members";
  size_t with_deadline = 0;
  for (const auto& [id, seq] : seqs_) with_deadline += seq->req.deadline_s ? 1 : 0;
  if (with_deadline != deadlines_.size()) return "deadline index is out of step";
  return {};
}

} // namespace conveyor
