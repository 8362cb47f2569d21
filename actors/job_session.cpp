#include "actors/job_session.hpp"

#include <ctime>
#include <utility>

namespace conveyor::actors {

std::variant<std::vector<token_id>, refusal> prompt_tokens(const schemas::prompt_input& input, const session_models& m,
                                                           const model::template_kwargs& kwargs) {
  const model::tokenizer& tok = *m.tok;
  if (!kwargs.empty() && !std::holds_alternative<std::vector<schemas::chat_message>>(input))
    return refusal{error_code::bad_request, "chat_template_kwargs: only a job with messages has a chat template to give them to"};
  std::vector<token_id> ids;
  try {
    if (auto* text = std::get_if<std::string>(&input)) {
      ids = tok.encode(*text, /*parse_special=*/false);
    } else if (auto* msgs = std::get_if<std::vector<schemas::chat_message>>(&input)) {
      if (!m.chat)
        return refusal{error_code::bad_request, "messages: the model's chat template did not compile at start-up (see the "
                                                "server's log); send `prompt` instead"};
      std::vector<model::chat_message> chat;
      for (const auto& x : *msgs) chat.push_back({x.role, x.content});
      std::string text;
      try {
        text = m.chat->render(chat, /*add_generation_prompt=*/true, std::time(nullptr), kwargs);
      } catch (const model::chat_template_error& e) {  // the template refused these messages
        return refusal{error_code::bad_request, std::string("messages: ") + e.what()};
      }
      ids = tok.encode(text, /*parse_special=*/true);
    } else {
      ids = std::get<std::vector<token_id>>(input);
      for (token_id t : ids)
        if (t < 0 || t >= tok.vocab_size())
          return refusal{error_code::bad_request, "prompt_tokens: id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                                      std::to_string(tok.vocab_size()) + ")"};
    }
  } catch (const std::exception& e) {
    return refusal{error_code::bad_request, std::string("prompt: cannot tokenize: ") + e.what()};
  }
  if (ids.empty()) return refusal{error_code::bad_request, "prompt: it has no tokens"};
  return ids;
}

namespace {

model::grammar_kind grammar_kind_of(schemas::response_format::kind k) {
  switch (k) {
    case schemas::response_format::kind::json_object: return model::grammar_kind::json_object;
    case schemas::response_format::kind::json_schema: return model::grammar_kind::json_schema;
    case schemas::response_format::kind::regex: return model::grammar_kind::regex;
    case schemas::response_format::kind::grammar: return model::grammar_kind::ebnf;
  }
  return model::grammar_kind::json_object;
}

// The job's structured-output constraint (null without response_format), advanced past the
// output a resumed job had already published; or why it cannot be had.
std::variant<std::shared_ptr<token_constraint>, refusal> constraint_for(const schemas::submit_request& job, const session_models& m,
                                                                        const std::optional<schemas::resume_point>& resume) {
  if (!job.format) return std::shared_ptr<token_constraint>{};
  if (!m.grammars) return refusal{error_code::bad_request, "response_format: structured outputs are not available on this server"};
  std::shared_ptr<token_constraint> c;
  try {
    c = m.grammars->constrain(grammar_kind_of(job.format->type), job.format->spec);
  } catch (const model::grammar_error& e) {
    return refusal{error_code::bad_request,
                   std::string("response_format: the ") + schemas::to_string(job.format->type) + " does not compile: " + e.what()};
  } catch (const std::exception& e) {
    return refusal{error_code::internal, std::string("response_format: the grammar engine failed: ") + e.what()};
  }
  if (resume)
    for (token_id t : resume->published)
      if (!c->accept(t)) break;  // not expected: the published output followed this grammar
  return c;
}

// The done event's timing in seconds, for the histograms (the same numbers the client sees).
request_latencies latencies(const schemas::done_event& done, int64_t completion_tokens) {
  request_latencies l;
  l.e2e_s = done.timing.e2e_ms / 1000.0;
  l.queue_s = done.timing.queue_ms / 1000.0;
  if (done.timing.ttft_ms) {
    l.ttft_s = *done.timing.ttft_ms / 1000.0;
    if (completion_tokens > 1) l.tpot_s = (l.e2e_s - *l.ttft_s) / static_cast<double>(completion_tokens - 1);
  }
  return l;
}

} // namespace

job_session::job_session(schemas::submit_request job, double arrival_s, const session_models& m,
                         std::optional<schemas::resume_point> resume, uint64_t fallback_seed)
    : job_(std::move(job)), arrival_s_(arrival_s), m_(m), resume_(std::move(resume)) {
  // The seed is stored with the job: a job resumed after a restart samples on with it.
  if (!job_.seed) job_.seed = fallback_seed;
  text_ = std::make_unique<model::text_stream>(*m_.tok, job_.stop);
  if (!resume_) return;
  // Replays the published output into the text: the next delta starts where the last ended.
  next_seq_ = resume_->next_seq;
  for (token_id t : resume_->published) {
    if (text_->stopped()) break;
    text_->push(t);
    ++tokens_taken_;
  }
  (void)text_->take_visible(false);
  resumed_tokens_ = static_cast<int32_t>(resume_->published.size());
  prompt_out_ = resumed_tokens_ > 0;  // its prompt logprobs went out with its first tokens
}

template <class Event>
schemas::published_event job_session::next_event(Event ev) {
  ev.id = job_.id;
  ev.seq = next_seq_++;
  return schemas::published_event(std::move(ev));
}

job_session::submit_plan job_session::plan_submit(double now_s) {
  submit_plan plan;
  submission& sub = plan.sub;
  sub.job_id = job_.id;
  auto tokens = prompt_tokens(job_.input, m_, job_.chat_template_kwargs);
  if (auto* why = std::get_if<refusal>(&tokens)) sub.refused = std::move(*why);
  else sub.req.prompt_token_ids = std::move(std::get<std::vector<token_id>>(tokens));
  sub.req.sampling = job_.to_sampling_params(*job_.seed);
  sub.req.stop = job_.to_stop_params(m_.tok->eog_ids());
  sub.req.speculate = job_.speculate;
  if (job_.prompt_logprobs) {
    sub.req.prompt_logprobs = *job_.prompt_logprobs;
    prompt_ids_ = sub.req.prompt_token_ids;
  }
  if (!sub.refused && !job_.logit_bias.empty() && job_.logit_bias.back().first >= m_.tok->vocab_size())
    sub.refused = refusal{error_code::bad_request, "logit_bias: token id " + std::to_string(job_.logit_bias.back().first) +
                                                       " is outside the vocabulary [0, " + std::to_string(m_.tok->vocab_size()) + ")"};
  if (!sub.refused) {
    auto c = constraint_for(job_, m_, resume_);
    if (auto* why = std::get_if<refusal>(&c)) sub.refused = std::move(*why);
    else sub.req.constraint = std::move(std::get<std::shared_ptr<token_constraint>>(c));
  }
  if (resume_) {
    // Continue from the prompt plus the output already published (recomputed; the prefix cache
    // helps), for the tokens still owed.
    prompt_len_ = static_cast<int32_t>(sub.req.prompt_token_ids.size());
    sub.resume = true;
    const std::optional<finish_reason> ended = resume_->cancelled ? std::optional(finish_reason::cancelled)
                                               : text_->stopped()  ? std::optional(finish_reason::stop)
                                               // its grammar had taken its end token (EOS under ignore_eos / min_tokens)
                                               : sub.req.constraint && sub.req.constraint->terminated() ? std::optional(finish_reason::stop)
                                                                       : job_table::resume_request(sub.req, resume_->published);
    if (ended && !sub.refused) {
      // The job table records its end; its done event goes out now.
      sub.ended = job_info{*ended == finish_reason::cancelled ? job_state::cancelled : job_state::finished, prompt_len_,
                           resumed_tokens_, *ended};
      plan.ended = resumed_end(*ended, now_s);
      return plan;
    }
  }
  sub.req.priority = job_.priority;
  sub.req.arrival_time_s = arrival_s_;
  if (job_.deadline_ms) sub.req.deadline_s = arrival_s_ + static_cast<double>(*job_.deadline_ms) / 1000.0;
  return plan;
}

schemas::published_event job_session::accepted() { return next_event(schemas::accepted_event{}); }

// The tokens event of what is safe to show (a stop string cannot start in it), or nothing when
// there is nothing to show or the job does not stream.
std::optional<schemas::published_event> job_session::take_tokens_event(bool final) {
  // Prompt logprobs go out in the job's first tokens event: its tokens wait for them (late only
  // when a preemption voided a step in flight that scored the prompt).
  if (job_.prompt_logprobs && !prompt_out_ && !pending_prompt_ && !final) return std::nullopt;
  std::string delta = text_->take_visible(final);
  if (!job_.stream || (pending_ids_.empty() && delta.empty())) return std::nullopt;
  schemas::tokens_event ev;
  ev.token_ids = std::move(pending_ids_);
  ev.text = std::move(delta);
  if (job_.logprobs) ev.logprobs = std::move(pending_logprobs_);
  if (job_.top_logprobs > 0) ev.top_logprobs = std::move(pending_top_);
  ev.prompt = std::move(pending_prompt_);
  pending_prompt_.reset();
  prompt_out_ = true;
  if (job_.token_bytes) {  // for clients without the tokenizer (Batch files' logprobs)
    ev.token_bytes.emplace();
    for (token_id t : ev.token_ids) ev.token_bytes->push_back(m_.tok->piece(t, /*special=*/true));
    if (ev.top_logprobs) {
      ev.top_bytes.emplace();
      for (const auto& alts : *ev.top_logprobs) {
        auto& b = ev.top_bytes->emplace_back();
        for (const auto& a : alts) b.push_back(m_.tok->piece(a.token, /*special=*/true));
      }
    }
  }
  pending_ids_.clear();
  pending_logprobs_.clear();
  pending_top_.clear();
  return next_event(std::move(ev));
}

job_session::tokens_result job_session::on_tokens(const token_batch& b) {
  tokens_result r;
  double prev = last_token_s_;  // one inter-token gap per token after the job's first
  for (double t : b.times_s) {
    if (prev >= 0) r.itl_gaps.push_back(t - prev);
    prev = t;
  }
  if (!b.times_s.empty()) last_token_s_ = b.times_s.back();
  if (b.prompt && job_.prompt_logprobs) {
    schemas::prompt_scores& p = pending_prompt_.emplace();
    p.token_ids = std::move(prompt_ids_);
    if (*job_.prompt_logprobs > 0) p.top.emplace();
    for (const sampled_token& s : *b.prompt) {
      p.logprobs.push_back(s.logprob);
      if (p.top) p.top->push_back(s.top);
    }
  }
  if (text_->stopped()) return r;
  for (size_t i = 0; i < b.tokens.size() && !text_->stopped(); ++i) {
    pending_ids_.push_back(b.tokens[i]);
    pending_logprobs_.push_back(b.logprobs[i]);
    if (job_.top_logprobs > 0) pending_top_.push_back(i < b.top.size() ? b.top[i] : std::vector<token_logprob>{});
    ++tokens_taken_;
    if (text_->push(b.tokens[i])) r.stop_matched = true;
  }
  r.event = take_tokens_event(false);
  return r;
}

job_session::end_result job_session::on_end(const job_end& end, double now_s) {
  end_result r;
  if (end.state == job_state::failed) {
    r.failed = true;
    r.events.push_back(next_event(schemas::error_event{{}, 0, error_code::internal, end.error}));
    return r;
  }
  text_->finish();
  if (auto ev = take_tokens_event(true)) r.events.push_back(std::move(*ev));
  const job_times& t = end.times;
  schemas::done_event done;
  done.reason = text_->stopped() ? finish_reason::stop : end.reason;
  done.text = text_->full_text();
  // After a stop string the scheduler learns of it a step or more late: the usage counts the
  // tokens up to the match (the ones the events carried), not those made meanwhile.
  // (A resumed job's earlier output is counted as output: job_table::end_job.)
  const int32_t completion = text_->stopped() ? tokens_taken_ : end.completion_tokens;
  done.usage = {end.prompt_tokens, completion, end.cached_tokens};
  done.timing.queue_ms = ((t.first_scheduled_s >= 0 ? t.first_scheduled_s : t.finished_s) - arrival_s_) * 1000.0;
  if (t.first_token_s >= 0 && resumed_tokens_ == 0) done.timing.ttft_ms = (t.first_token_s - arrival_s_) * 1000.0;
  done.timing.e2e_ms = (now_s - arrival_s_) * 1000.0;
  r.reason = done.reason;
  r.latencies = latencies(done, completion);
  r.events.push_back(next_event(std::move(done)));
  return r;
}

job_end job_session::resumed_end(finish_reason reason, double now_s) const {
  job_end end;
  end.reason = reason;
  end.prompt_tokens = prompt_len_;
  end.completion_tokens = resumed_tokens_;
  end.times.finished_s = now_s;
  return end;
}

std::optional<job_session::end_result> job_session::on_resume_refused(const refusal& why, double now_s) {
  if (why.code == error_code::shutting_down) return std::nullopt;
  if (why.code == error_code::too_long) return on_end(resumed_end(finish_reason::length, now_s), now_s);  // prompt and output reach max_model_len
  end_result r;
  r.failed = true;
  r.events.push_back(next_event(schemas::error_event{{}, 0, why.code, "the job could not resume after a restart: " + why.message}));
  return r;
}

} // namespace conveyor::actors
