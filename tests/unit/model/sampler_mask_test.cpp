// The sampler's structured-output mask, its top-logprobs list and its logprob switch, against
// direct computations.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <numeric>
#include <random>

#include "model/cpu/sampler.hpp"

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

// The sampler as it was written first: every candidate sorted, then truncated and drawn. The
// lazily sorted one must draw the same tokens.
token_id full_sort_draw(std::span<const float> logits, const sampling_params& p, int64_t position) {
  std::vector<std::pair<float, token_id>> cand;
  for (size_t i = 0; i < logits.size(); ++i) cand.emplace_back(logits[i] / p.temperature, static_cast<token_id>(i));
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = cand.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::nth_element(cand.begin(), cand.begin() + p.top_k, cand.end(), by_logit);
    n = static_cast<size_t>(p.top_k);
  }
  std::sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), by_logit);
  const float mx = cand[0].first;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(cand[i].first - mx));
  for (size_t i = 0; i < n; ++i) cand[i].first = static_cast<float>(std::exp(static_cast<double>(cand[i].first - mx)) / sum);
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < n) {
      cum += cand[keep++].first;
      if (cum >= p.top_p) break;
    }
    n = std::max<size_t>(keep, 1);
  }
  if (p.min_p > 0.0f) {
    const float floor_p = p.min_p * cand[0].first;
    size_t keep = 1;
    while (keep < n && cand[keep].first >= floor_p) ++keep;
    n = keep;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += cand[i].first;
  const double target = sample_coin(p.seed, position) * total;
  double cum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cum += cand[i].first;
    if (target < cum) return cand[i].second;
  }
  return cand[n - 1].second;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sampler_mask)

BOOST_AUTO_TEST_CASE(lazy_sorting_draws_what_a_full_sort_draws) {
  sampler_scratch scratch;
  int differ = 0, draws = 0;
  for (uint32_t trial = 0; trial < 40; ++trial) {
    const auto logits = random_logits(trial % 2 ? 49152 : 3000, trial);
    for (const auto& [t, k, tp, mp] : {std::tuple{1.0f, 0, 1.0f, 0.0f}, std::tuple{0.7f, 40, 1.0f, 0.0f}, std::tuple{1.2f, 0, 0.9f, 0.0f},
                                       std::tuple{1.0f, 0, 1.0f, 0.05f}, std::tuple{0.8f, 100, 0.95f, 0.02f}, std::tuple{3.0f, 0, 0.5f, 0.0f}}) {
      sampling_params p;
      p.temperature = t;
      p.top_k = k;
      p.top_p = tp;
      p.min_p = mp;
      p.seed = trial;
      for (int64_t pos = 0; pos < 5; ++pos, ++draws) differ += sample_token(logits, p, pos, scratch).token != full_sort_draw(logits, p, pos);
    }
  }
  // The sampler's normaliser sums a vector e^x (about 1 ulp) in double lanes, the reference
  // std::exp in double one by one: a relative difference of ~1e-7, which flips a draw only when
  // its coin falls that close to a boundary: none expected in 1200 draws.
  BOOST_TEST(differ == 0, differ << " of " << draws << " draws differ");
}

// Logits on a few levels: ties everywhere, also across the first chunk's cut (the one-pass pick
// of the 64 best must order them by id, as the full sort does), also after top_k's nth_element has
// reordered the candidates (top_k 1000 of 5000 leaves more than 4 x 64 of them).
BOOST_AUTO_TEST_CASE(draws_among_tied_logits_match_a_full_sort) {
  sampler_scratch scratch;
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> level(0, 9);
  int differ = 0, draws = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(trial % 2 ? 5000 : 300);
    for (float& l : logits) l = 0.5f * static_cast<float>(level(rng));
    for (const auto& [k, tp] : {std::pair{0, 1.0f}, std::pair{100, 1.0f}, std::pair{1000, 1.0f}, std::pair{0, 0.3f}}) {
      sampling_params p;
      p.temperature = 0.5f;
      p.top_k = k;
      p.top_p = tp;
      p.seed = static_cast<uint64_t>(trial);
      for (int64_t pos = 0; pos < 20; ++pos, ++draws) differ += sample_token(logits, p, pos, scratch).token != full_sort_draw(logits, p, pos);
    }
  }
  BOOST_TEST(differ == 0, differ << " of " << draws << " draws differ");
}

// Greedy: the first of the largest logits, whatever the length (vector body, scalar tail), with
// ties in the body and the tail, signed zeros, and a NaN (which no comparison picks).
BOOST_AUTO_TEST_CASE(greedy_takes_the_first_of_the_largest) {
  sampler_scratch scratch;
  sampling_params greedy;
  greedy.temperature = 0.0f;
  const auto first_max = [](const std::vector<float>& l) {
    size_t best = 0;
    for (size_t i = 1; i < l.size(); ++i)
      if (l[i] > l[best]) best = i;
    return static_cast<token_id>(best);
  };
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> level(-3, 3);
  for (size_t n : {1u, 7u, 8u, 9u, 31u, 64u, 1000u, 1003u})
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<float> l(n);
      for (float& x : l) x = static_cast<float>(level(rng));
      if (trial % 5 == 1) l[n - 1] = 9.0f;                   // the largest in the tail
      if (trial % 5 == 2) std::fill(l.begin(), l.end(), 0.0f), l[n / 2] = -0.0f;  // signed zeros
      if (trial % 5 == 3) l[trial % n] = NAN;
      if (trial % 5 == 4) std::fill(l.begin(), l.end(), -INFINITY);
      BOOST_TEST(sample_token(l, greedy, 0, scratch).token == first_max(l), "n " << n << " trial " << trial);
    }
}

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

// Ties everywhere, the cut among them: the n best are the lowest ids of the tied logits, as a
// stable sort by logit gives them (the one-pass selection must not keep a later id).
BOOST_AUTO_TEST_CASE(top_logprobs_break_ties_by_the_lower_id) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(0, 5);
  for (int32_t n : {1, 7, 20}) {
    std::vector<float> logits(1000);
    for (float& l : logits) l = static_cast<float>(level(rng));
    sampler_scratch scratch;
    std::vector<token_logprob> top;
    top_logprobs(logits, n, top, scratch);
    std::vector<token_id> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](token_id a, token_id b) { return logits[a] > logits[b]; });
    BOOST_TEST_REQUIRE(top.size() == static_cast<size_t>(n));
    for (size_t i = 0; i < top.size(); ++i) BOOST_TEST(top[i].token == order[i], "n " << n << " i " << i);
  }
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

// Logit edits (logit_bias, penalties): the draw sees the edited row, greedy included, and the
// logprob stays the raw distribution's (as vLLM's default raw_logprobs).
BOOST_AUTO_TEST_CASE(edits_change_the_draw_but_not_the_logprob) {
  const int V = 400;
  const auto logits = random_logits(V, 11);
  sampler_scratch scratch;
  for (float temperature : {0.0f, 0.9f}) {
    for (int64_t position = 0; position < 40; ++position) {
      sampling_params p;
      p.temperature = temperature;
      p.top_k = 50;
      p.seed = 3;
      p.repetition_penalty = 1.3f;
      p.frequency_penalty = 0.7f;
      p.logit_bias = {{static_cast<token_id>(position * 7 % V), 30.0f}, {399, -100.0f}};
      std::vector<logit_edit> edits;
      make_logit_edits(p, std::vector<token_id>{1, 2, 3, 2}, std::vector<token_id>{5, 5, 399}, edits);
      std::vector<float> edited = logits;
      apply_logit_edits(edited, edits, p);
      const sample_result with = sample_token(logits, p, position, scratch, {}, edits);
      const sample_result pre = sample_token(edited, p, position, scratch);
      BOOST_TEST(with.token == pre.token);
      BOOST_TEST(std::abs(with.logprob - log_softmax(logits, with.token)) < 1e-5);  // the raw distribution
      if (temperature == 0.0f) BOOST_TEST(with.token == position * 7 % V);  // +30 wins the argmax
    }
  }
}

// A job that reads no logprobs skips the softmax: the same tokens, no logprob.
BOOST_AUTO_TEST_CASE(logprobs_off_draws_the_same_tokens) {
  const auto logits = random_logits(500, 13);
  sampler_scratch scratch;
  for (float temperature : {0.0f, 0.8f})
    for (int64_t position = 0; position < 50; ++position) {
      sampling_params p;
      p.temperature = temperature;
      p.top_p = 0.9f;
      p.seed = 9;
      const sample_result on = sample_token(logits, p, position, scratch);
      p.logprobs = false;
      const sample_result off = sample_token(logits, p, position, scratch);
      BOOST_TEST(on.token == off.token);
      BOOST_TEST(std::abs(on.logprob - log_softmax(logits, on.token)) < 1e-5);
      BOOST_TEST(off.logprob == 0.0f);
    }
}

BOOST_AUTO_TEST_SUITE_END()
