// Prompt logprobs (request::prompt_logprobs): which rows of each chunk score which prompt token,
// the scores going out once with the first output token, no prefix-cache hit for such a prompt,
// a preemption rescoring it, and the refusals.
#include <boost/test/unit_test.hpp>

#include <optional>

#include "engine/job_table.hpp"
#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

struct scoring_fixture {
  scheduler_config sched;
  cache_config cache;
  int32_t num_blocks = 16;
  scoring_fixture() {
    cache.block_size = 4;
    sched.max_model_len = 64;
    sched.max_num_batched_tokens = 4;
  }
  conveyor::scheduler make() const { return {sched, cache, num_blocks}; }
};

request scored(seq_id id, int32_t prompt_len, int32_t top) {
  request r = make_request(id, prompt_len, 3);
  r.prompt_logprobs = top;
  return r;
}

std::vector<seq_event> tokens_in(const std::vector<seq_event>& events) {
  std::vector<seq_event> out;
  for (const seq_event& e : events)
    if (e.kind == event_kind::token) out.push_back(e);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler_prompt_logprobs)

BOOST_FIXTURE_TEST_CASE(each_chunk_scores_the_prompt_tokens_after_its_rows, scoring_fixture) {
  auto s = make();
  BOOST_TEST(s.submit(scored(1, 10, 2), 0.0).accepted);
  // Chunks 0..3, 4..7, 8..9: rows 0..8 score prompt tokens 1..9; row 9 samples.
  const std::vector<std::vector<token_id>> targets{{1001, 1002, 1003, 1004}, {1005, 1006, 1007, 1008}, {1009}};
  for (size_t it = 0; it < targets.size(); ++it) {
    BOOST_TEST_CONTEXT("chunk " << it) {
      auto out = run_step(s);
      BOOST_REQUIRE(out.plan.seqs.size() == 1u);
      BOOST_TEST(out.plan.seqs[0].prompt_targets == targets[it], boost::test_tools::per_element());
      BOOST_TEST(out.plan.seqs[0].prompt_top == 2);
      const auto tokens = tokens_in(out.events);
      BOOST_TEST(tokens.size() == (it + 1 == targets.size() ? 1u : 0u));
      if (tokens.empty()) continue;
      BOOST_REQUIRE(tokens[0].prompt.has_value());
      const auto& prompt = *tokens[0].prompt;
      BOOST_REQUIRE(prompt.size() == 9u);
      for (size_t p = 0; p < prompt.size(); ++p) {
        BOOST_TEST(prompt[p].token == 1001 + static_cast<token_id>(p));
        BOOST_TEST(prompt[p].logprob == -static_cast<float>(p + 1));  // the fake scores with the target's position
        BOOST_TEST(prompt[p].top.size() == 2u);
      }
    }
  }
  // Decodes score nothing, and later tokens carry no prompt.
  auto out = run_step(s);
  BOOST_TEST(out.plan.seqs[0].prompt_targets.empty());
  BOOST_TEST(!tokens_in(out.events).at(0).prompt.has_value());
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_FIXTURE_TEST_CASE(a_one_token_prompt_sends_an_empty_list, scoring_fixture) {
  auto s = make();
  BOOST_TEST(s.submit(scored(1, 1, 0), 0.0).accepted);
  auto out = run_step(s);
  BOOST_TEST(out.plan.seqs[0].prompt_targets.empty());
  const auto tokens = tokens_in(out.events);
  BOOST_REQUIRE(tokens.size() == 1u);
  BOOST_REQUIRE(tokens[0].prompt.has_value());
  BOOST_TEST(tokens[0].prompt->empty());
}

BOOST_FIXTURE_TEST_CASE(a_scored_prompt_is_computed_whole_despite_the_prefix_cache, scoring_fixture) {
  cache.enable_prefix_caching = true;
  sched.max_num_batched_tokens = 64;
  auto s = make();
  BOOST_TEST(s.submit(make_request(1, 12, 1), 0.0).accepted);
  run_step(s);  // prefill + its one token: the prompt's 3 full blocks are cached
  BOOST_TEST(s.submit(make_request(2, 12, 1), 0.0).accepted);
  BOOST_TEST(run_step(s).plan.seqs.at(0).num_computed_tokens == 8);  // a plain job hits (all but the last block)
  request r = scored(3, 12, 0);
  r.stop.max_tokens = 1;
  BOOST_TEST(s.submit(std::move(r), 0.0).accepted);
  auto out = run_step(s);
  BOOST_TEST(out.plan.seqs.at(0).num_computed_tokens == 0);
  BOOST_TEST(out.plan.seqs.at(0).prompt_targets.size() == 11u);
  const auto tokens = tokens_in(out.events);
  BOOST_REQUIRE(tokens.size() == 1u);
  BOOST_TEST(tokens[0].prompt->size() == 11u);
  BOOST_TEST(finished_in(out.events).at(0).num_cached_tokens == 0);
}

BOOST_FIXTURE_TEST_CASE(a_prompt_preempted_while_scored_is_scored_again_whole, scoring_fixture) {
  num_blocks = 4;  // a 4-token job decoding beside a 12-token scored prompt runs the pool dry
  sched.max_model_len = 16;
  cache.enable_prefix_caching = false;
  auto s = make();
  BOOST_TEST(s.submit(make_request(1, 4, 6), 0.0).accepted);
  BOOST_TEST(s.submit(scored(2, 12, 1), 0.0).accepted);
  std::optional<seq_event> first;
  for (int step = 0; step < 40 && !first; ++step)
    for (const seq_event& e : tokens_in(run_step(s).events))
      if (e.id == 2) first = e;
  BOOST_TEST(s.stats().num_preemptions >= 1);  // the precondition: seq 2 lost its blocks mid-prompt
  BOOST_REQUIRE(first.has_value());
  BOOST_REQUIRE(first->prompt.has_value());
  BOOST_REQUIRE(first->prompt->size() == 11u);
  for (size_t p = 0; p < 11; ++p) {
    BOOST_TEST((*first->prompt)[p].token == 1001 + static_cast<token_id>(p));
    BOOST_TEST((*first->prompt)[p].logprob == -static_cast<float>(p + 1));
  }
  BOOST_TEST(s.check_invariants() == "");
}

// Pipelined: the step that scores the prompt's last chunk is in flight when the next plan preempts
// the sequence. Its sampled token stands, but its scores are void: the prompt goes out, whole,
// with the first token after the recompute instead.
BOOST_FIXTURE_TEST_CASE(scores_voided_by_a_preemption_in_flight_go_out_with_a_later_token, scoring_fixture) {
  num_blocks = 4;
  sched.max_model_len = 16;
  sched.max_num_batched_tokens = 16;
  cache.enable_prefix_caching = false;
  auto s = make();
  BOOST_TEST(s.submit(make_request(1, 4, 2), 0.0).accepted);
  BOOST_TEST(s.submit(scored(2, 8, 0), 0.0).accepted);
  const step_plan first = s.schedule(0.0);
  BOOST_REQUIRE(first.seqs.size() == 2u);
  BOOST_TEST(first.seqs[1].prompt_targets.size() == 7u);
  const step_plan second = s.schedule(0.0);  // planned while `first` runs: seq 2 finds no block
  BOOST_TEST(s.stats().num_preemptions == 1);
  BOOST_TEST(find_in(second, 2) == nullptr);
  std::vector<seq_event> events = s.update(fake_step(first), 0.0);
  const auto early = tokens_in(events);
  BOOST_REQUIRE(early.size() == 2u);
  BOOST_TEST(early[1].id == 2u);
  BOOST_TEST(!early[1].prompt.has_value());  // its scores were void: not sent short
  s.update(fake_step(second), 0.0);
  std::optional<seq_event> later;
  for (int step = 0; step < 20 && !later; ++step)
    for (const seq_event& e : tokens_in(run_step(s).events))
      if (e.id == 2) later = e;
  BOOST_REQUIRE(later.has_value());
  BOOST_REQUIRE(later->prompt.has_value());
  BOOST_REQUIRE(later->prompt->size() == 7u);
  for (size_t p = 0; p < 7; ++p) BOOST_TEST((*later->prompt)[p].logprob == -static_cast<float>(p + 1));
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(refused_out_of_range_and_where_the_executor_cannot_score) {
  scheduler_config sched;
  cache_config cache;
  {
    conveyor::scheduler s(sched, cache, 256);
    const auto r = s.submit(scored(1, 4, 21), 0.0);
    BOOST_TEST(!r.accepted);
    BOOST_TEST(r.reason == error_code::bad_request);
    BOOST_TEST(r.message.find("prompt_logprobs") != std::string::npos);
  }
  sched.no_prompt_logprobs_on = "cuda";
  conveyor::scheduler s(sched, cache, 256);
  const auto r = s.submit(scored(1, 4, 0), 0.0);
  BOOST_TEST(!r.accepted);
  BOOST_TEST(r.message.find("cuda executor") != std::string::npos);
  BOOST_TEST(s.submit(make_request(2, 4, 1), 0.0).accepted);  // the rest serves
}

BOOST_AUTO_TEST_CASE(a_resumed_job_with_published_output_is_not_scored_again) {
  request r = scored(1, 4, 3);
  BOOST_TEST(!job_table::resume_request(r, {}).has_value());
  BOOST_TEST(r.prompt_logprobs == 3);  // nothing was published: the prompt is scored
  BOOST_TEST(!job_table::resume_request(r, {7, 8}).has_value());
  BOOST_TEST(r.prompt_logprobs == -1);  // the scores went out with the first token
}

BOOST_AUTO_TEST_SUITE_END()
