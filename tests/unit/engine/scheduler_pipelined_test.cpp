// Pipelined steps (async scheduling): schedule() with one step in flight, k_previous_sample,
// results applied in plan order. Seeded random workloads run through kv_toy_executor, whose
// tokens depend on the KV cache's content: every job's tokens must be its reference stream (a
// prefix of it when cancelled or past its deadline), synchronous and pipelined alike, with
// preemption, prefix caching, chunked prompts, static batches, cancels and deadlines, and the invariants must
// hold after every call.
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <set>

#include "engine_test_util.hpp"
#include "kv_toy_executor.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

int32_t pick(std::mt19937_64& rng, int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }

struct job_log {
  request req;
  std::vector<token_id> tokens;
  bool finished = false;
  finish_reason reason = finish_reason::stop;
};

struct run_stats {
  int64_t steps = 0, placeholders = 0, preemptions = 0;
};

run_stats run_seed(uint64_t seed, bool pipelined) {
  std::mt19937_64 rng(seed);
  scheduler_config sched;
  cache_config cache;
  cache.block_size = 1 << pick(rng, 0, 3);
  const int32_t num_blocks = pick(rng, 6, 40);
  sched.max_model_len = std::min(num_blocks * cache.block_size, pick(rng, 6, 64));
  sched.max_num_seqs = pick(rng, 1, 8);
  sched.max_num_batched_tokens = pick(rng, 1, 48);
  sched.policy = pick(rng, 0, 1) ? scheduling_policy::priority : scheduling_policy::fcfs;
  sched.batching = pick(rng, 0, 4) == 0 ? batching_mode::static_batch : batching_mode::continuous;
  cache.enable_prefix_caching = pick(rng, 0, 1) == 1;
  cache.kv_watermark = pick(rng, 0, 2) == 0 ? 0.1 : 0.0;
  const bool chaos = pick(rng, 0, 2) == 0;
  conveyor::scheduler s(sched, cache, num_blocks);
  kv_toy_executor ex(num_blocks, cache.block_size, sched.max_model_len);

  std::vector<std::vector<token_id>> stems(3);
  for (auto& stem : stems)
    for (int i = 0; i < 16; ++i) stem.push_back(pick(rng, 10, 30));
  const int32_t num_jobs = pick(rng, 10, 40);
  std::map<seq_id, job_log> jobs;
  std::set<seq_id> victims;  // cancelled or finish()ed at some point: may end early
  seq_id next_id = 1;
  int32_t outstanding = 0;
  run_stats stats;
  auto take = [&](const std::vector<seq_event>& events) {
    for (const seq_event& e : events) {
      job_log& j = jobs.at(e.id);
      BOOST_TEST(!j.finished, "event after the finish of " << e.id);
      if (e.kind == event_kind::token) {
        j.tokens.push_back(e.token);
      } else {
        j.finished = true;
        j.reason = e.reason;
        BOOST_TEST(e.num_output_tokens == static_cast<int32_t>(j.tokens.size()));
      }
    }
  };
  for (int step = 0; step < 20000; ++step) {
    BOOST_TEST_CONTEXT("seed " << seed << (pipelined ? " pipelined" : " synchronous") << " step " << step) {
      const double now = step;
      while (next_id <= static_cast<seq_id>(num_jobs) && pick(rng, 0, 2) == 0) {
        request r;
        r.id = next_id++;
        const int32_t len = pick(rng, 1, sched.max_model_len - 1);
        const auto& stem = stems[static_cast<size_t>(pick(rng, 0, 2))];
        for (int32_t i = 0; i < len; ++i) r.prompt_token_ids.push_back(i < 16 && pick(rng, 0, 3) ? stem[static_cast<size_t>(i)] : pick(rng, 10, 30));
        r.stop.max_tokens = pick(rng, 1, 20);
        r.stop.eos_token_ids = {0};
        r.stop.ignore_eos = pick(rng, 0, 1) == 1;
        r.priority = pick(rng, 0, 3);
        r.arrival_time_s = now;
        if (chaos && pick(rng, 0, 4) == 0) r.deadline_s = now + pick(rng, 0, 30);
        jobs[r.id].req = r;
        BOOST_REQUIRE(s.submit(r, now).accepted);
      }
      if (chaos && next_id > 1 && pick(rng, 0, 9) == 0) {
        const seq_id victim = static_cast<seq_id>(pick(rng, 1, static_cast<int32_t>(next_id) - 1));
        victims.insert(victim);
        if (pick(rng, 0, 1)) s.cancel(victim); else s.finish(victim, finish_reason::stop);
      }
      const step_plan plan = s.schedule(now);
      take(s.take_events());
      BOOST_TEST(plan.num_tokens() <= sched.max_num_batched_tokens);
      for (const scheduled_seq& p : plan.seqs) {
        for (size_t i = 0; i < p.tokens.size(); ++i) {
          if (p.tokens[i] != k_previous_sample) continue;
          ++stats.placeholders;
          BOOST_TEST((pipelined && p.tokens.size() == 1 && p.sample), "a placeholder that is not a lone decode token");
        }
      }
      if (!plan.seqs.empty()) {
        ex.submit(plan);
        ++outstanding;
      }
      // Synchronous: every step is applied before the next plan. Pipelined: the next plan is made
      // while this one is in flight, so a result is taken only when two are out or nothing new
      // could be planned.
      const bool collect = outstanding > 0 && (!pipelined || outstanding == 2 || plan.seqs.empty());
      if (collect) {
        take(s.update(ex.collect(), now));
        --outstanding;
      }
      BOOST_TEST(s.num_steps_in_flight() == outstanding);
      const std::string inv = s.check_invariants();
      BOOST_REQUIRE_MESSAGE(inv.empty(), inv);
    }
    if (next_id > static_cast<seq_id>(num_jobs) && !s.has_unfinished() && outstanding == 0) break;
  }
  BOOST_TEST_CONTEXT("seed " << seed << (pipelined ? " pipelined" : " synchronous")) {
    BOOST_TEST(!s.has_unfinished());
    BOOST_TEST(s.kv().num_used_blocks() == 0);
    for (const auto& [id, j] : jobs) {
      BOOST_TEST_CONTEXT("job " << id) {
        BOOST_TEST(j.finished);
        const std::vector<token_id> ref = reference_stream(j.req, sched.max_model_len);
        const bool ended_early = j.reason == finish_reason::deadline || victims.count(id) != 0;
        BOOST_TEST(j.tokens.size() <= ref.size());
        const size_t n = std::min(j.tokens.size(), ref.size());
        BOOST_TEST(std::equal(j.tokens.begin(), j.tokens.begin() + static_cast<std::ptrdiff_t>(n), ref.begin()),
                   "tokens differ from the reference stream");
        if (!ended_early) BOOST_TEST(j.tokens.size() == ref.size());
      }
    }
  }
  stats.steps = ex.steps();
  stats.preemptions = s.stats().num_preemptions;
  return stats;
}

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler_pipelined)

BOOST_AUTO_TEST_CASE(random_workloads_give_the_reference_tokens_synchronous_and_pipelined) {
  run_stats sync_total, pipe_total;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    const run_stats a = run_seed(seed, false), b = run_seed(seed, true);
    sync_total.steps += a.steps;
    pipe_total.steps += b.steps;
    pipe_total.placeholders += b.placeholders;
    pipe_total.preemptions += b.preemptions;
    BOOST_TEST(a.placeholders == 0);
  }
  // The workloads do exercise what they are meant to.
  BOOST_TEST(pipe_total.placeholders > 1000);
  BOOST_TEST(pipe_total.preemptions > 10);
}

BOOST_AUTO_TEST_CASE(a_decode_is_planned_ahead_with_a_placeholder) {
  scheduler_config sc;
  sc.max_model_len = 64;
  conveyor::scheduler s(sc, cache_config{}, 16);
  BOOST_REQUIRE(s.submit(make_request(1, 5, 4), 0).accepted);
  const step_plan a = s.schedule(0);  // the prompt, sampling its first token
  BOOST_REQUIRE(a.seqs.size() == 1u);
  BOOST_TEST(a.seqs[0].sample);
  const step_plan b = s.schedule(0);  // planned while `a` runs
  BOOST_REQUIRE(b.seqs.size() == 1u);
  BOOST_TEST(b.seqs[0].num_computed_tokens == 5);
  BOOST_TEST(b.seqs[0].tokens == std::vector<token_id>{k_previous_sample});
  BOOST_TEST(b.seqs[0].sample);
  BOOST_TEST(s.num_steps_in_flight() == 2);
  BOOST_TEST(s.check_invariants() == "");
  const auto ev_a = s.update(fake_step(a, 7), 0);
  BOOST_TEST(ev_a.size() == 1u);
  const step_plan c = s.schedule(0);  // `b` in flight: `c` continues from position 6
  BOOST_REQUIRE(c.seqs.size() == 1u);
  BOOST_TEST(c.seqs[0].num_computed_tokens == 6);
  BOOST_TEST(c.seqs[0].tokens == std::vector<token_id>{k_previous_sample});
  s.update(fake_step(b, 8), 0);
  BOOST_TEST(s.find(1)->tokens.back() == 8);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_token_that_ends_by_length_is_not_planned_past) {
  scheduler_config sc;
  sc.max_model_len = 64;
  conveyor::scheduler s(sc, cache_config{}, 16);
  BOOST_REQUIRE(s.submit(make_request(1, 5, 1), 0).accepted);  // max_tokens 1
  BOOST_REQUIRE(s.submit(make_request(2, 3, 5), 0).accepted);
  const step_plan a = s.schedule(0);
  const step_plan b = s.schedule(0);
  BOOST_TEST(find_in(b, 1) == nullptr);  // its first token is its last
  BOOST_TEST(find_in(b, 2) != nullptr);
  const auto ev = s.update(fake_step(a), 0);
  BOOST_TEST(finished_in(ev).size() == 1u);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(an_eos_in_flight_drops_the_token_planned_after_it) {
  scheduler_config sc;
  sc.max_model_len = 64;
  conveyor::scheduler s(sc, cache_config{}, 16);
  request r = make_request(1, 5, 10);
  r.stop.eos_token_ids = {2};
  BOOST_REQUIRE(s.submit(r, 0).accepted);
  const step_plan a = s.schedule(0);
  const step_plan b = s.schedule(0);
  BOOST_REQUIRE(find_in(b, 1) != nullptr);
  auto ev = s.update(fake_step(a, 2), 0);  // EOS: finished now, blocks free
  BOOST_REQUIRE(finished_in(ev).size() == 1u);
  BOOST_TEST(s.kv().num_used_blocks() == 0);
  BOOST_REQUIRE(s.submit(make_request(1, 4, 3), 0).accepted);  // the id is reused at once
  ev = s.update(fake_step(b, 9), 0);  // b's token for the old job is dropped
  BOOST_TEST(ev.empty());
  BOOST_TEST(s.find(1)->num_output_tokens() == 0);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_placeholder_resolves_to_the_previous_steps_sample) {
  kv_toy_executor ex(8, 4, 32);
  step_plan a;
  a.step_id = 1;
  a.seqs.push_back({1, 0, {11, 12, 13}, {0}, true, {}, nullptr, {}, {}, 0});
  ex.submit(a);
  step_plan b;
  b.step_id = 2;
  b.seqs.push_back({1, 3, {k_previous_sample}, {0}, true, {}, nullptr, {}, {}, 0});
  ex.submit(b);
  const step_result ra = ex.collect(), rb = ex.collect();
  BOOST_TEST(rb.sampled.at(0).token == toy_next_token({11, 12, 13, ra.sampled.at(0).token}));
  BOOST_CHECK_THROW(ex.collect(), std::logic_error);
  step_plan c;  // seq 2 sampled nothing in b
  c.step_id = 3;
  c.seqs.push_back({2, 0, {k_previous_sample}, {1}, true, {}, nullptr, {}, {}, 0});
  BOOST_CHECK_THROW(ex.submit(c), std::invalid_argument);
}

// With speculative decoding, a sequence about to draft is not planned ahead (a draft continues its
// newest token): it waits for its token and then drafts. A sequence that opted out, or whose last
// try found nothing to draft, runs ahead as before, and its steps ahead count towards a retry.
BOOST_AUTO_TEST_CASE(a_drafting_sequence_waits_for_its_token_instead_of_running_ahead) {
  scheduler_config sc;
  sc.max_model_len = 64;
  sc.speculative.method = spec_method::ngram;
  sc.speculative.num_speculative_tokens = 4;
  sc.speculative.prompt_lookup_min = 1;
  sc.speculative.fixed_cost_tokens = 64;
  conveyor::scheduler s(sc, cache_config{}, 32);
  request r = make_request(1, 0, 20);
  r.prompt_token_ids = {3, 4, 5, 3, 4, 5, 3, 4};  // repeats: the lookup finds a continuation of 5
  BOOST_REQUIRE(s.submit(r, 0).accepted);
  request opt_out = make_request(2, 8, 20);
  opt_out.speculate = false;
  BOOST_REQUIRE(s.submit(opt_out, 0).accepted);
  const step_plan a = s.schedule(0);  // both prompts
  BOOST_REQUIRE(a.seqs.size() == 2u);
  const step_plan b = s.schedule(0);  // planned while `a` runs
  BOOST_TEST(find_in(b, 1) == nullptr);  // waits to draft
  BOOST_REQUIRE(find_in(b, 2) != nullptr);  // runs ahead
  BOOST_TEST(find_in(b, 2)->tokens == std::vector<token_id>{k_previous_sample});
  (void)s.update(fake_step(a, 5), 0);
  const step_plan c = s.schedule(0);  // `b` in flight; sequence 1's token 5 is known
  const scheduled_seq* one = find_in(c, 1);
  BOOST_REQUIRE(one != nullptr);
  BOOST_TEST(one->num_drafts > 0);
  BOOST_TEST(one->tokens.front() == 5);
  BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_SUITE_END()
