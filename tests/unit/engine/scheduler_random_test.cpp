// Seeded random workloads on tiny pools: arrivals, lengths, shared prefixes, EOS, cancels,
// stop-string finishes, deadlines, priorities, both batching modes. After every step: budgets
// hold, check_invariants() passes, every job finishes exactly once, and under fcfs jobs start
// in submit order and all of them finish (nothing starves). A failing seed is a regression.
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <set>

#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

struct job_record {
  int32_t max_tokens = 0;
  int32_t tokens_seen = 0;
  bool finished = false;
};

int32_t pick(std::mt19937_64& rng, int32_t lo, int32_t hi) {
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

void run_seed(uint64_t seed) {
  std::mt19937_64 rng(seed);
  scheduler_config sched;
  cache_config cache;
  cache.block_size = 1 << pick(rng, 0, 3);
  const int32_t num_blocks = pick(rng, 4, 40);
  sched.max_model_len = std::min(num_blocks * cache.block_size, pick(rng, 4, 64));
  sched.max_num_seqs = pick(rng, 1, 8);
  sched.max_num_batched_tokens = pick(rng, 1, 48);
  sched.policy = pick(rng, 0, 1) ? scheduling_policy::priority : scheduling_policy::fcfs;
  sched.batching = pick(rng, 0, 3) == 0 ? batching_mode::static_batch : batching_mode::continuous;
  cache.enable_prefix_caching = pick(rng, 0, 1) == 1;
  cache.kv_watermark = pick(rng, 0, 2) == 0 ? 0.1 : 0.0;
  if (pick(rng, 0, 3) == 0) sched.max_num_queued_reqs = pick(rng, 1, 10);
  if (pick(rng, 0, 3) == 0) sched.max_num_queued_tokens = pick(rng, 64, 256);
  conveyor::scheduler s(sched, cache, num_blocks);

  // A few shared prefixes so the prefix cache sees hits.
  std::vector<std::vector<token_id>> stems(3);
  for (auto& stem : stems)
    for (int i = 0; i < 16; ++i) stem.push_back(pick(rng, 10, 30));

  const int32_t num_jobs = pick(rng, 20, 60);
  const bool chaos = pick(rng, 0, 1) == 1; // cancels, finish(), deadlines
  std::map<seq_id, job_record> jobs;
  std::vector<seq_id> submitted; // accepted, in submit order
  std::vector<seq_id> started;   // first appearance in a plan
  seq_id next_id = 1;
  int step = 0;
  for (; step < 20000; ++step) {
    BOOST_TEST_CONTEXT("seed " << seed << " step " << step) {
      const double now = step;
      // Arrivals: a burst now and then, until every job has been offered once.
      while (next_id <= static_cast<seq_id>(num_jobs) && pick(rng, 0, 2) == 0) {
        request r;
        r.id = next_id++;
        const int32_t len = pick(rng, 1, sched.max_model_len - 1);
        const auto& stem = stems[pick(rng, 0, 2)];
        for (int32_t i = 0; i < len; ++i)
          r.prompt_token_ids.push_back(i < 16 && pick(rng, 0, 3) ? stem[i] : pick(rng, 10, 30));
        r.stop.max_tokens = pick(rng, 1, 20);
        r.stop.eos_token_ids = {0};
        r.stop.ignore_eos = pick(rng, 0, 1) == 1;
        r.priority = pick(rng, 0, 3);
        r.arrival_time_s = now;
        if (chaos && pick(rng, 0, 4) == 0) r.deadline_s = now + pick(rng, 0, 30);
        const submit_result res = s.submit(r, now);
        if (res.accepted) {
          jobs[r.id] = {r.stop.max_tokens, 0, false};
          submitted.push_back(r.id);
        } else {
          BOOST_TEST((res.reason == error_code::overloaded), res.message);
        }
      }
      if (chaos && !submitted.empty() && pick(rng, 0, 9) == 0) {
        const seq_id victim = submitted[pick(rng, 0, static_cast<int32_t>(submitted.size()) - 1)];
        const bool live = s.find(victim) != nullptr;
        const bool ended = pick(rng, 0, 1) ? s.cancel(victim) : s.finish(victim, finish_reason::stop);
        BOOST_TEST(ended == live);
      }

      const step_plan plan = s.schedule(now);
      std::vector<seq_event> events = s.take_events();
      BOOST_TEST(plan.num_tokens() <= sched.max_num_batched_tokens);
      BOOST_TEST(static_cast<int32_t>(plan.seqs.size()) <= sched.max_num_seqs);
      std::set<seq_id> in_plan;
      step_result result;
      result.step_id = plan.step_id;
      for (const scheduled_seq& p : plan.seqs) {
        BOOST_TEST(in_plan.insert(p.id).second);
        BOOST_TEST(!p.tokens.empty());
        const size_t covered = p.block_table.size() * static_cast<size_t>(cache.block_size);
        BOOST_TEST(covered >= p.num_computed_tokens + p.tokens.size());
        if (std::find(started.begin(), started.end(), p.id) == started.end())
          started.push_back(p.id);
        if (p.sample) result.sampled.push_back({p.id, pick(rng, 0, 9), -1.0f, {}});
      }
      if (!plan.seqs.empty()) {
        auto more = s.update(result, now);
        events.insert(events.end(), more.begin(), more.end());
      }
      for (const seq_event& e : events) {
        auto it = jobs.find(e.id);
        BOOST_REQUIRE(it != jobs.end());
        BOOST_TEST(!it->second.finished); // nothing after a finish, and one finish only
        if (e.kind == event_kind::token) {
          ++it->second.tokens_seen;
        } else {
          it->second.finished = true;
          BOOST_TEST(e.num_output_tokens == it->second.tokens_seen);
        }
        BOOST_TEST(it->second.tokens_seen <= it->second.max_tokens);
      }
      const std::string inv = s.check_invariants();
      BOOST_TEST(inv == "");
      if (!inv.empty()) return;
    }
    if (next_id > static_cast<seq_id>(num_jobs) && !s.has_unfinished()) break;
  }
  BOOST_TEST_CONTEXT("seed " << seed) {
    BOOST_TEST(!s.has_unfinished(), "jobs left after " << step << " steps");
    for (const auto& [id, job] : jobs) BOOST_TEST(job.finished, "job " << id << " never finished");
    BOOST_TEST(s.kv().num_used_blocks() == 0);
    if (sched.policy == scheduling_policy::fcfs) {
      // Jobs start in submit order (skipping those that ended before they ever ran).
      size_t k = 0;
      for (seq_id id : started) {
        while (k < submitted.size() && submitted[k] != id) ++k;
        BOOST_TEST(k < submitted.size(), "job " << id << " started out of submit order");
      }
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler)

BOOST_AUTO_TEST_CASE(random_workloads_keep_every_invariant) {
  for (uint64_t seed = 1; seed <= 300; ++seed) run_seed(seed);
}

BOOST_AUTO_TEST_SUITE_END()
