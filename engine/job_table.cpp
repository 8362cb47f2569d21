// The job lifecycle: admission, the id registry, timestamps and flow control of token outputs.
#include "engine/job_table.hpp"

#include <algorithm>
#include <utility>

namespace conveyor {

job_table::job_table(const scheduler_config& sched, const cache_config& cache, int32_t num_kv_blocks, size_t max_remembered,
                     double retention_s)
    : sched_(sched, cache, num_kv_blocks), max_remembered_(max_remembered), retention_s_(retention_s) {
  counters_.kv_blocks_total = num_kv_blocks;
}

job_table::~job_table() = default;

std::variant<seq_id, refusal> job_table::submit(const std::string& job_id, request req, const std::optional<refusal>& refused,
                                                double now_s, bool resume) {
  if (reserved_.count(job_id)) {
    if (!resume) return refusal{error_code::duplicate, "job '" + job_id + "' is resuming after a restart; not run again"};
    if (draining_ || failed_)  // it stays in the journal and resumes at the next start
      return refusal{error_code::shutting_down, "the server is shutting down"};
    reserved_.erase(job_id);
    const int32_t prompt = static_cast<int32_t>(req.prompt_token_ids.size()) - req.resumed_output, n = req.resumed_output;
    auto outcome = admit(job_id, std::move(req), refused, now_s);
    if (auto* why = std::get_if<refusal>(&outcome)) {
      // A continuation longer than max_model_len had reached its length: it ended then.
      if (why->code == error_code::too_long) remember(job_id, job_info{job_state::finished, prompt, n, finish_reason::length}, now_s);
      else remember(job_id, job_info{job_state::failed, prompt, n, std::nullopt}, now_s);
    }
    return outcome;
  }
  return admit(job_id, std::move(req), refused, now_s);
}

void job_table::end_resumed(const std::string& job_id, job_info info, double now_s) {
  if (reserved_.erase(job_id)) remember(job_id, info, now_s);
}

std::variant<seq_id, refusal> job_table::admit(const std::string& job_id, request req, const std::optional<refusal>& refused,
                                               double now_s) {
  if (by_job_.count(job_id)) return refusal{error_code::duplicate, "job '" + job_id + "' is already running; not run again"};
  if (auto it = finished_.find(job_id); it != finished_.end())
    return refusal{error_code::duplicate,
                   "job '" + job_id + "' already ran (" + to_string(it->second.state) + "); not run again"};
  if (draining_ || failed_)
    return refusal{error_code::shutting_down, "the server is shutting down; submit elsewhere or retry later"};
  if (refused) return *refused;
  const seq_id id = next_id_++;
  req.id = id;
  const int32_t resumed_output = req.resumed_output;
  const double arrival_s = req.arrival_time_s;
  const auto prompt_tokens = static_cast<int64_t>(req.prompt_token_ids.size());
  const submit_result r = sched_.submit(std::move(req), now_s);
  if (!r.accepted) {
    // (A live seq id is this table's own bug, not the producer's duplicate job id.)
    return refusal{r.reason == error_code::duplicate ? error_code::bad_request : r.reason, r.message};
  }
  live_job& job = live_[id];
  job.job_id = job_id;
  job.times.arrival_s = arrival_s;
  job.times.queued_s = now_s;
  job.resumed_output = resumed_output;
  by_job_[job_id] = id;
  ++counters_.jobs_accepted;
  counters_.prompt_tokens_total += prompt_tokens;
  // A deadline already past at submit ends the job at once.
  drain_scheduler_events(sched_.take_events(), now_s);
  return id;
}

std::optional<job_state> job_table::cancel(const std::string& job_id, double now_s) {
  if (auto it = by_job_.find(job_id); it != by_job_.end() && sched_.cancel(it->second))
    drain_scheduler_events(sched_.take_events(), now_s);
  auto info = status(job_id);
  if (!info) return std::nullopt;
  return info->state;
}

void job_table::finish_stop(seq_id id, double now_s) {
  if (sched_.finish(id, finish_reason::stop)) drain_scheduler_events(sched_.take_events(), now_s);
}

void job_table::cancel_all(double now_s) {
  std::vector<seq_id> ids;
  for (const auto& [id, job] : live_) ids.push_back(id);
  for (seq_id id : ids) sched_.cancel(id);
  drain_scheduler_events(sched_.take_events(), now_s);
}

void job_table::fail_all(const std::string& why, double now_s) {
  failed_ = true;
  std::vector<seq_id> ids;
  for (const auto& [id, job] : live_) ids.push_back(id);
  for (seq_id id : ids) {
    job_end end;
    end.state = job_state::failed;
    end.error = why;
    if (const sequence* s = sched_.find(id)) {
      end.prompt_tokens = s->num_prompt_tokens;
      end.completion_tokens = s->num_output_tokens();
    }
    end.times = live_.at(id).times;
    end.times.finished_s = now_s;
    sched_.cancel(id);  // frees its blocks; the cancelled event is superseded by the failure
    end_job(id, std::move(end));
  }
  (void)sched_.take_events();
}

step_plan job_table::schedule(double now_s) {
  step_plan plan = sched_.schedule(now_s);
  drain_scheduler_events(sched_.take_events(), now_s);  // deadlines found while planning
  for (const auto& s : plan.seqs) {
    auto it = live_.find(s.id);
    if (it != live_.end() && it->second.times.first_scheduled_s < 0) {
      it->second.times.first_scheduled_s = now_s;
      first_scheduled_.push_back(it->second.job_id);
    }
  }
  if (!plan.seqs.empty()) ++counters_.steps_total;
  return plan;
}

std::optional<finish_reason> job_table::resume_request(request& req, const std::vector<token_id>& published) {
  const auto n = static_cast<int32_t>(published.size());
  const stop_params& stop = req.stop;
  if (n >= 1 && n >= stop.min_tokens) {  // the last output token was a stop id (as check_stop sees it)
    const auto has = [last = published.back()](const std::vector<token_id>& ids) {
      return std::find(ids.begin(), ids.end(), last) != ids.end();
    };
    if ((!stop.ignore_eos && has(stop.eos_token_ids)) || has(stop.stop_token_ids)) return finish_reason::stop;
  }
  if (n >= stop.max_tokens) return finish_reason::length;
  req.prompt_token_ids.insert(req.prompt_token_ids.end(), published.begin(), published.end());
  req.stop.max_tokens -= n;
  req.stop.min_tokens = std::max(0, req.stop.min_tokens - n);
  req.resumed_output = n;
  if (n > 0) req.prompt_logprobs = -1;  // they went out with the first output token
  return std::nullopt;
}

std::vector<std::string> job_table::take_first_scheduled() { return std::exchange(first_scheduled_, {}); }

void job_table::update(const step_result& result, double now_s) { drain_scheduler_events(sched_.update(result, now_s), now_s); }

// Tokens first (into each job's pending batch; sent now unless a batch is unacknowledged),
// then finishes, so a job's tokens always precede its end.
void job_table::drain_scheduler_events(std::vector<seq_event> events, double now_s) {
  std::vector<seq_id> touched;
  for (auto& e : events) {
    if (e.kind != event_kind::token) continue;
    ++counters_.completion_tokens_total;
    auto it = live_.find(e.id);
    if (it == live_.end()) continue;
    live_job& job = it->second;
    if (job.times.first_token_s < 0) job.times.first_token_s = now_s;
    job.times.last_token_s = now_s;
    if (job.pending.tokens.empty()) touched.push_back(e.id);
    job.pending.tokens.push_back(e.token);
    job.pending.logprobs.push_back(e.logprob);
    job.pending.top.push_back(std::move(e.top));
    job.pending.times_s.push_back(now_s);
    if (e.prompt) job.pending.prompt = std::move(e.prompt);
  }
  for (seq_id id : touched) {
    live_job& job = live_.at(id);
    if (!job.in_flight) emit_tokens(id, job);
  }
  for (const auto& e : events) {
    if (e.kind != event_kind::finished) continue;
    auto it = live_.find(e.id);
    if (it == live_.end()) continue;
    job_end end;
    end.state = e.reason == finish_reason::cancelled ? job_state::cancelled : job_state::finished;
    end.reason = e.reason;
    end.prompt_tokens = e.num_prompt_tokens;
    end.completion_tokens = e.num_output_tokens;
    end.cached_tokens = e.num_cached_tokens;
    end.times = it->second.times;
    end.times.finished_s = now_s;
    ++counters_.jobs_finished;
    counters_.cached_tokens_total += e.num_cached_tokens;
    end_job(e.id, std::move(end));
  }
}

void job_table::emit_tokens(seq_id id, live_job& job) {
  job_output out;
  out.what = job_output::kind::tokens;
  out.id = id;
  out.tokens = std::move(job.pending);
  job.pending = token_batch{};
  job.in_flight = true;
  outbox_.push_back(std::move(out));
}

// A finishing job's waiting tokens go out at once, before its end, without waiting for the
// acknowledgement (the shell delivers outputs in order).
void job_table::end_job(seq_id id, job_end end) {
  auto it = live_.find(id);
  live_job& job = it->second;
  if (!job.pending.tokens.empty()) emit_tokens(id, job);
  if (const int32_t n = job.resumed_output; n > 0) {  // its earlier output counts as output again
    end.prompt_tokens = std::max(0, end.prompt_tokens - n);
    end.completion_tokens += n;
    end.cached_tokens = std::min(end.cached_tokens, end.prompt_tokens);
  }
  job_info info{end.state, end.prompt_tokens, end.completion_tokens, std::nullopt};
  if (end.state != job_state::failed) info.reason = end.reason;
  remember(job.job_id, info, end.times.finished_s);
  by_job_.erase(job.job_id);
  live_.erase(it);
  job_output out;
  out.what = job_output::kind::finished;
  out.id = id;
  out.end = std::move(end);
  outbox_.push_back(std::move(out));
}

void job_table::on_published(seq_id id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  it->second.in_flight = false;
  if (!it->second.pending.tokens.empty()) emit_tokens(id, it->second);
}

std::vector<job_output> job_table::take_outputs() {
  std::vector<job_output> out;
  out.swap(outbox_);
  return out;
}

void job_table::remember(const std::string& job_id, job_info info, double ended_s) {
  if (finished_.emplace(job_id, info).second) finished_order_.emplace_back(ended_s, job_id);
  while (finished_order_.size() > max_remembered_) {
    finished_.erase(finished_order_.front().second);
    finished_order_.pop_front();
  }
}

void job_table::forget_expired(double now_s) {
  while (!finished_order_.empty() && finished_order_.front().first < now_s - retention_s_) {
    finished_.erase(finished_order_.front().second);
    finished_order_.pop_front();
  }
}

std::optional<job_info> job_table::status(const std::string& job_id) const {
  if (auto it = by_job_.find(job_id); it != by_job_.end()) {
    const sequence* s = sched_.find(it->second);
    if (!s) return job_info{job_state::queued, 0, 0, std::nullopt};
    const int32_t n = live_.at(it->second).resumed_output;
    return job_info{s->status == seq_status::running ? job_state::running : job_state::queued, s->num_prompt_tokens - n,
                    s->num_output_tokens() + n, std::nullopt};
  }
  if (auto it = finished_.find(job_id); it != finished_.end()) return it->second;
  if (reserved_.count(job_id)) return job_info{job_state::queued, 0, 0, std::nullopt};  // resuming, not yet resubmitted
  return std::nullopt;
}

const std::string* job_table::job_id_of(seq_id id) const {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second.job_id;
}

serving_stats job_table::stats(double now_s) {
  const scheduler_stats s = sched_.stats();
  if (rate_since_s_ < 0) rate_since_s_ = now_s;
  if (const double dt = now_s - rate_since_s_; dt >= 1.0) {
    counters_.tokens_per_s = static_cast<double>(counters_.completion_tokens_total - rate_since_tokens_) / dt;
    rate_since_s_ = now_s;
    rate_since_tokens_ = counters_.completion_tokens_total;
  }
  serving_stats r = counters_;
  r.queued = s.num_waiting;
  r.running = s.num_running;
  r.kv_blocks_used = s.num_kv_blocks_used;
  r.kv_usage = s.num_kv_blocks > 0 ? static_cast<double>(s.num_kv_blocks_used) / s.num_kv_blocks : 0.0;
  r.preemptions_total = s.num_preemptions;
  r.spec_drafts_total = s.num_spec_drafts;
  r.spec_draft_tokens_total = s.num_spec_draft_tokens;
  r.spec_accepted_tokens_total = s.num_spec_accepted_tokens;
  r.spec_accepted_per_pos = s.num_spec_accepted_per_pos;
  r.draining = draining_;
  return r;
}

} // namespace conveyor
