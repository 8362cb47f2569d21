// The sampler's structured-output mask and its top-logprobs list, against direct computations.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <numeric>
#include <random>

#include "model/sampler.hpp"

using namespace conveyor;
using namespace conveyor::model;

namespace {

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> l(static_cast<size_t>(n));
  for (auto& x : l) x = d(rng);
  return l;
}

std::vector<uint32_t> mask_of(int vocab, const std::vector<token_id>& allowed) {
  std::vector<uint32_t> m(static_cast<size_t>((vocab + 31) / 32), 0u);
  for (token_id t : allowed) m[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
  return m;
}

double log_softmax(const std::vector<float>& l, token_id t) {
  double mx = *std::max_element(l.begin(), l.end()), s = 0;
  for (float x : l) s += std::exp(x - mx);
  return l[static_cast<size_t>(t)] - mx - std::log(s);
}

} // namespace

BOOST_AUTO_TEST_SUITE(sampler_mask)

BOOST_AUTO_TEST_CASE(greedy_and_random_draws_stay_inside_the_mask) {
  const int V = 1000;
  const auto logits = random_logits(V, 7);
  const std::vector<token_id> allowed = {3, 64, 65, 511, 999};
  const auto mask = mask_of(V, allowed);
  sampler_scratch scratch;
  sampling_params greedy;
  greedy.temperature = 0.0f;
  const auto g = sample_token(logits, greedy, 0, scratch, mask);
  token_id best = allowed[0];
  for (token_id t : allowed)
    if (logits[static_cast<size_t>(t)] > logits[static_cast<size_t>(best)]) best = t;
  BOOST_TEST(g.token == best);
  BOOST_TEST(std::abs(g.logprob - log_softmax(logits, best)) < 1e-5);  // under the unmasked distribution
  std::vector<int> seen(static_cast<size_t>(V), 0);
  sampling_params p;
  p.temperature = 1.5f;
  p.seed = 42;
  for (int64_t pos = 0; pos < 2000; ++pos) ++seen[static_cast<size_t>(sample_token(logits, p, pos, scratch, mask).token)];
  int inside = 0;
  for (token_id t : allowed) inside += seen[static_cast<size_t>(t)];
  BOOST_TEST(inside == 2000);
  // With top_k over the allowed tokens only: k = 1 is the allowed argmax.
  p.top_k = 1;
  BOOST_TEST(sample_token(logits, p, 5, scratch, mask).token == best);
}

BOOST_AUTO_TEST_CASE(a_mask_that_allows_nothing_is_ignored) {
  const auto logits = random_logits(70, 3);
  sampler_scratch scratch;
  sampling_params greedy;
  greedy.temperature = 0.0f;
  const auto free = sample_token(logits, greedy, 0, scratch);
  BOOST_TEST(sample_token(logits, greedy, 0, scratch, mask_of(70, {})).token == free.token);
  std::vector<uint32_t> too_short(1, ~0u);  // 32 bits for 70 tokens: not a mask for this vocabulary
  BOOST_TEST(sample_token(logits, greedy, 0, scratch, too_short).token == free.token);
}

BOOST_AUTO_TEST_CASE(top_logprobs_are_the_n_best_in_order) {
  auto logits = random_logits(500, 11);
  logits[10] = logits[20] = 30.0f;  // a tie: the lower id first
  sampler_scratch scratch;
  std::vector<token_logprob> top;
  top_logprobs(logits, 20, top, scratch);
  BOOST_TEST_REQUIRE(top.size() == 20u);
  BOOST_TEST(top[0].token == 10);
  BOOST_TEST(top[1].token == 20);
  std::vector<token_id> order(500);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](token_id a, token_id b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < top.size(); ++i) {
    BOOST_TEST(top[i].token == order[i]);
    BOOST_TEST(std::abs(top[i].logprob - log_softmax(logits, order[i])) < 1e-5);
  }
  top_logprobs(logits, 0, top, scratch);
  BOOST_TEST(top.empty());
  top_logprobs(std::vector<float>{1.0f, 2.0f}, 5, top, scratch);
  BOOST_TEST(top.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
