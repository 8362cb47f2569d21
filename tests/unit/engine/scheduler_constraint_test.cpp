// Structured outputs in the engine: a constrained sequence hands its constraint to the executor
// only on steps that sample, sees every drawn token once, and ends (stop) when its grammar does.
#include <boost/test/unit_test.hpp>

#include "engine/scheduler.hpp"
#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

// Completes after `length` accepted tokens; refuses token 13.
struct counting_constraint final : token_constraint {
  int32_t length = 3;
  std::vector<token_id> seen;
  bool ended = false;
  void fill_mask(std::vector<uint32_t>& mask) override { mask.assign(1, ~0u); }
  bool accept(token_id t) override {
    if (t == 13) return false;
    seen.push_back(t);
    ended = static_cast<int32_t>(seen.size()) >= length;
    return true;
  }
  bool terminated() const override { return ended; }
  void rollback(int32_t n) override {
    seen.resize(seen.size() - static_cast<size_t>(n));
    ended = static_cast<int32_t>(seen.size()) >= length;
  }
};

conveyor::scheduler make_scheduler(int32_t budget) {
  scheduler_config sched;
  sched.max_num_batched_tokens = budget;
  sched.max_model_len = 64;
  cache_config cache;
  cache.block_size = 4;
  cache.enable_prefix_caching = false;
  return {sched, cache, 16};
}

std::optional<finish_reason> finish_of(const std::vector<seq_event>& events, seq_id id) {
  for (const auto& e : events)
    if (e.kind == event_kind::finished && e.id == id) return e.reason;
  return std::nullopt;
}

} // namespace

BOOST_AUTO_TEST_SUITE(scheduler_constraint)

BOOST_AUTO_TEST_CASE(the_constraint_goes_to_sampling_steps_and_ends_the_sequence) {
  auto s = make_scheduler(4);
  auto c = std::make_shared<counting_constraint>();
  request r = make_request(1, 6, 10);  // chunks of 4 and 2: only the second samples
  r.constraint = c;
  BOOST_TEST(s.submit(r, 0.0).accepted);
  auto first = run_step(s, 0.0, 7);
  BOOST_TEST_REQUIRE(find_in(first.plan, 1) != nullptr);
  BOOST_TEST(!find_in(first.plan, 1)->sample);
  BOOST_TEST(find_in(first.plan, 1)->constraint == nullptr);
  BOOST_TEST(c->seen.empty());
  auto second = run_step(s, 0.0, 7);
  BOOST_TEST(find_in(second.plan, 1)->constraint.get() == c.get());
  BOOST_TEST((c->seen == std::vector<token_id>{7}));
  auto third = run_step(s, 0.0, 8);
  BOOST_TEST(!finish_of(third.events, 1).has_value());
  auto fourth = run_step(s, 0.0, 9);  // the third token completes the grammar
  BOOST_TEST((c->seen == std::vector<token_id>{7, 8, 9}));
  BOOST_TEST((finish_of(fourth.events, 1) == finish_reason::stop));
}

BOOST_AUTO_TEST_CASE(a_refused_token_ends_the_sequence_and_free_ones_are_untouched) {
  auto s = make_scheduler(64);
  auto c = std::make_shared<counting_constraint>();
  c->length = 100;
  request r = make_request(1, 3, 10);
  r.constraint = c;
  s.submit(r, 0.0);
  s.submit(make_request(2, 3, 10, 2000), 0.0);
  auto out = run_step(s, 0.0, 13);
  BOOST_TEST((finish_of(out.events, 1) == finish_reason::stop));
  BOOST_TEST(!finish_of(out.events, 2).has_value());
  BOOST_TEST(find_in(out.plan, 2)->constraint == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
