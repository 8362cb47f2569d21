// job_session: the request actor's policy as tables, without an actor. Each row is one rule of
// the job's life (docs/architecture.md, "Where each rule lives").
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "actors/job_session.hpp"
#include "harness.hpp"

namespace conveyor::actor_test {
namespace {

const model::tokenizer& byte_tok() {
  static const model::tokenizer tok = make_byte_tokenizer();
  return tok;
}

constexpr token_id kEos = 256;

std::vector<token_id> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

schemas::submit_request job(const std::string& prompt, int32_t max_tokens = 8) {
  schemas::submit_request j;
  j.id = "j";
  j.input = prompt;
  j.max_tokens = max_tokens;
  j.stream = true;
  return j;
}

actors::job_session session(schemas::submit_request j, std::optional<schemas::resume_point> resume = std::nullopt, double arrival = 10.0) {
  return actors::job_session(std::move(j), arrival, actors::session_models{&byte_tok(), nullptr, nullptr}, std::move(resume), 42);
}

token_batch batch(const std::string& s, double t0 = 11.0) {
  token_batch b;
  for (char c : s) {
    b.tokens.push_back(static_cast<unsigned char>(c));
    b.logprobs.push_back(-0.5f);
    b.times_s.push_back(t0);
    t0 += 0.01;
  }
  return b;
}

template <class Event>
const Event& as(const schemas::published_event& ev) {
  return std::get<Event>(ev.event);
}

} // namespace

BOOST_AUTO_TEST_SUITE(job_session_rules)

// What a resumed job's stored output says: it ended (and how), or it runs on for what is owed.
BOOST_AUTO_TEST_CASE(the_resume_verdict) {
  struct row {
    const char* name;
    std::string published;
    bool cancelled = false;
    std::vector<std::string> stop;
    bool eos_last = false;
    int32_t max_tokens = 8;
    std::optional<finish_reason> ended;
  };
  const std::vector<row> rows = {
      {"nothing published: runs", "", false, {}, false, 8, std::nullopt},
      {"some output: runs on", "abc", false, {}, false, 8, std::nullopt},
      {"its cancel was stored", "ab", true, {}, false, 8, finish_reason::cancelled},
      {"a stop string in the output", "ab.c", false, {"."}, false, 8, finish_reason::stop},
      {"EOS was its last token", "ab", false, {}, true, 8, finish_reason::stop},
      {"max_tokens reached", "abcd", false, {}, false, 4, finish_reason::length},
  };
  for (const auto& r : rows) {
    schemas::submit_request j = job("hi", r.max_tokens);
    j.stop = r.stop;
    schemas::resume_point at;
    at.published = bytes_of(r.published);
    if (r.eos_last) at.published.push_back(kEos);
    at.next_seq = 3;
    at.cancelled = r.cancelled;
    auto s = session(j, at);
    auto plan = s.plan_submit(20.0);
    BOOST_TEST(plan.sub.resume, r.name);
    BOOST_TEST(!plan.sub.refused.has_value(), r.name);
    BOOST_TEST(plan.ended.has_value() == r.ended.has_value(), r.name);
    if (r.ended) {
      BOOST_TEST((plan.ended->reason == *r.ended), r.name);
      BOOST_TEST_REQUIRE(plan.sub.ended.has_value(), r.name);
      BOOST_TEST(plan.sub.ended->completion_tokens == static_cast<int32_t>(at.published.size()), r.name);
      BOOST_TEST((plan.sub.ended->state == (*r.ended == finish_reason::cancelled ? job_state::cancelled : job_state::finished)), r.name);
    } else {
      // The prompt grows by the published output; the job owes what is left of max_tokens.
      BOOST_TEST(plan.sub.req.prompt_token_ids.size() == 2 + at.published.size(), r.name);
      BOOST_TEST(plan.sub.req.stop.max_tokens == r.max_tokens - static_cast<int32_t>(at.published.size()), r.name);
    }
  }
}

// Inputs that cannot run are refused before the job table sees them, each with its code.
BOOST_AUTO_TEST_CASE(what_is_refused_before_the_scheduler) {
  struct row {
    const char* name;
    schemas::submit_request j;
    error_code code;
    const char* says;
  };
  schemas::submit_request empty = job("");
  schemas::submit_request out_of_vocab = job("");
  out_of_vocab.input = std::vector<token_id>{5, 999};
  schemas::submit_request chat = job("");
  chat.input = std::vector<schemas::chat_message>{{"user", "hi"}};
  schemas::submit_request format = job("hi");
  format.format = schemas::response_format{schemas::response_format::kind::json_object, ""};
  const std::vector<row> rows = {
      {"empty prompt", empty, error_code::bad_request, "no tokens"},
      {"token id outside the vocabulary", out_of_vocab, error_code::bad_request, "outside the vocabulary"},
      {"messages without a chat template", chat, error_code::bad_request, "chat template"},
      {"response_format without a grammar engine", format, error_code::bad_request, "not available"},
  };
  for (const auto& r : rows) {
    auto plan = session(r.j).plan_submit(20.0);
    BOOST_TEST_REQUIRE(plan.sub.refused.has_value(), r.name);
    BOOST_TEST((plan.sub.refused->code == r.code), r.name);
    BOOST_TEST(plan.sub.refused->message.find(r.says) != std::string::npos, r.name << ": " << plan.sub.refused->message);
  }
}

BOOST_AUTO_TEST_CASE(seed_and_deadline) {
  schemas::submit_request j = job("hi");
  j.deadline_ms = 1500;
  auto s = session(j, std::nullopt, 10.0);
  BOOST_TEST(*s.job().seed == 42u);  // none given: the fallback, stored with the job
  auto plan = s.plan_submit(20.0);
  BOOST_TEST(plan.sub.req.deadline_s.value_or(0) == 11.5);
  BOOST_TEST(plan.sub.req.arrival_time_s == 10.0);
  BOOST_TEST(plan.sub.req.sampling.seed == 42u);
  j.seed = 7;
  BOOST_TEST(*session(j).job().seed == 7u);  // given: kept
}

// Events are numbered from 0 (or from a resumed job's next seq) and a stop string never shows.
BOOST_AUTO_TEST_CASE(events_numbering_and_stop_strings) {
  schemas::submit_request j = job("hi");
  j.stop = {"END"};
  auto s = session(j);
  (void)s.plan_submit(10.5);
  BOOST_TEST(s.accepted().seq() == 0u);
  auto r1 = s.on_tokens(batch("abE"));
  BOOST_TEST_REQUIRE(r1.event.has_value());
  BOOST_TEST(as<schemas::tokens_event>(*r1.event).text == "ab");  // "E" may start the stop string
  BOOST_TEST(r1.event->seq() == 1u);
  BOOST_TEST(!r1.stop_matched);
  BOOST_TEST(r1.itl_gaps.size() == 2u);  // one per token after the job's first
  auto r2 = s.on_tokens(batch("NDxyz", 12.0));
  BOOST_TEST(r2.stop_matched);
  BOOST_TEST(r2.itl_gaps.size() == 5u);
  job_end end;
  end.reason = finish_reason::length;  // the scheduler learns of the stop a step late
  end.prompt_tokens = 2;
  end.completion_tokens = 8;
  end.times.first_scheduled_s = 10.5;
  end.times.first_token_s = 11.0;
  auto done = s.on_end(end, 13.0);
  BOOST_TEST(!done.failed);
  BOOST_TEST_REQUIRE(!done.events.empty());
  const auto& d = as<schemas::done_event>(done.events.back());
  BOOST_TEST((d.reason == finish_reason::stop));
  BOOST_TEST(d.text == "ab");
  BOOST_TEST(d.usage.completion_tokens == 5);  // a, b, E, N, D: up to the match, not 8
  BOOST_TEST(d.timing.queue_ms == 500.0);
  BOOST_TEST(*d.timing.ttft_ms == 1000.0);
  BOOST_TEST(d.timing.e2e_ms == 3000.0);
  // accepted 0, tokens 1 ("ab"), tokens 2 (the stop string's tokens, no text), done 3
  BOOST_TEST_REQUIRE(r2.event.has_value());
  BOOST_TEST(as<schemas::tokens_event>(*r2.event).text.empty());
  BOOST_TEST(done.events.size() == 1u);
  BOOST_TEST(done.events.back().seq() == 3u);
  BOOST_TEST(*done.latencies.ttft_s == 1.0);
}

// A resumed job: numbering goes on, its text continues, its TTFT is not measured again.
// Prompt logprobs ride in the first tokens event: tokens that come before them wait; the prompt
// is the tokenized one, each entry the engine's score; a resumed job that had published output
// does not wait for scores that went out before the restart.
BOOST_AUTO_TEST_CASE(prompt_logprobs_ride_in_the_first_tokens_event) {
  schemas::submit_request j = job("hi");
  j.prompt_logprobs = 1;
  auto s = session(j);
  auto plan = s.plan_submit(10.5);
  BOOST_TEST(plan.sub.req.prompt_logprobs == 1);
  BOOST_TEST(!s.on_tokens(batch("a")).event.has_value());  // (a preemption voided its scores)
  token_batch b = batch("b", 11.5);
  b.prompt = std::vector<sampled_token>{{1, 'i', -2.5f, {{'i', -2.5f}}}};
  auto r = s.on_tokens(b);
  BOOST_TEST_REQUIRE(r.event.has_value());
  const auto& ev = as<schemas::tokens_event>(*r.event);
  BOOST_TEST(ev.text == "ab");
  BOOST_TEST_REQUIRE(ev.prompt.has_value());
  BOOST_TEST(ev.prompt->token_ids == bytes_of("hi"), boost::test_tools::per_element());
  BOOST_TEST(ev.prompt->logprobs == std::vector<float>{-2.5f}, boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(ev.prompt->top.has_value());
  BOOST_TEST(ev.prompt->top->at(0).at(0).token == 'i');
  auto later = s.on_tokens(batch("c", 12.0));
  BOOST_TEST_REQUIRE(later.event.has_value());
  BOOST_TEST(!as<schemas::tokens_event>(*later.event).prompt.has_value());
  schemas::resume_point at;
  at.published = bytes_of("ab");
  at.next_seq = 2;
  auto resumed = session(j, at);
  (void)resumed.plan_submit(10.5);
  BOOST_TEST(resumed.on_tokens(batch("c")).event.has_value());
}

BOOST_AUTO_TEST_CASE(a_resumed_job_goes_on_where_it_was) {
  schemas::resume_point at;
  at.published = bytes_of("ab");
  at.next_seq = 4;
  auto s = session(job("hi"), at);
  auto plan = s.plan_submit(10.5);
  BOOST_TEST(!plan.ended.has_value());
  auto r = s.on_tokens(batch("c"));
  BOOST_TEST_REQUIRE(r.event.has_value());
  BOOST_TEST(r.event->seq() == 4u);
  BOOST_TEST(as<schemas::tokens_event>(*r.event).text == "c");
  job_end end;
  end.reason = finish_reason::length;
  end.completion_tokens = 3;
  end.times.first_token_s = 11.0;
  auto done = s.on_end(end, 12.0);
  const auto& d = as<schemas::done_event>(done.events.back());
  BOOST_TEST(d.text == "abc");
  BOOST_TEST(!d.timing.ttft_ms.has_value());
  BOOST_TEST(done.events.back().seq() == 5u);
}

// What a resumed job becomes when the job table refuses it.
BOOST_AUTO_TEST_CASE(a_refused_resume) {
  struct row {
    const char* name;
    error_code code;
    bool silent;
    std::optional<finish_reason> done;
  };
  const std::vector<row> rows = {
      {"shutting down: the next start resumes it", error_code::shutting_down, true, std::nullopt},
      {"prompt and output reach max_model_len: length", error_code::too_long, false, finish_reason::length},
      {"anything else: an error event with its code", error_code::overloaded, false, std::nullopt},
  };
  for (const auto& r : rows) {
    schemas::resume_point at;
    at.published = bytes_of("ab");
    at.next_seq = 3;
    auto s = session(job("hi"), at);
    (void)s.plan_submit(10.0);
    auto out = s.on_resume_refused(refusal{r.code, "x"}, 12.0);
    BOOST_TEST(!out.has_value() == r.silent, r.name);
    if (r.silent) continue;
    BOOST_TEST_REQUIRE(!out->events.empty(), r.name);
    const auto& last = out->events.back();
    BOOST_TEST(last.seq() == 3u + (out->events.size() - 1), r.name);
    if (r.done) {
      BOOST_TEST((as<schemas::done_event>(last).reason == *r.done), r.name);
      BOOST_TEST(as<schemas::done_event>(last).usage.completion_tokens == 2, r.name);
    } else {
      BOOST_TEST(out->failed, r.name);
      BOOST_TEST((as<schemas::error_event>(last).code == r.code), r.name);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_failed_job_ends_with_an_internal_error) {
  auto s = session(job("hi"));
  (void)s.plan_submit(10.0);
  (void)s.accepted();
  job_end end;
  end.state = job_state::failed;
  end.error = "the device failed";
  auto out = s.on_end(end, 11.0);
  BOOST_TEST(out.failed);
  BOOST_TEST_REQUIRE(out.events.size() == 1u);
  BOOST_TEST((as<schemas::error_event>(out.events[0]).code == error_code::internal));
  BOOST_TEST(as<schemas::error_event>(out.events[0]).message == "the device failed");
  BOOST_TEST(out.events[0].seq() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::actor_test
