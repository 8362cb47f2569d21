// logit_bias and the presence, frequency and repetition penalties: the sparse edits the engine
// hands the executor, applied to a row, against a dense reference written the way vLLM writes
// them (LogitBiasLogitsProcessor, then apply_penalties: repetition over prompt | output, then
// logits -= frequency * counts, then logits -= presence * (counts > 0)); and how the scheduler
// plans a penalized sequence.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>

#include "engine/logit_edits.hpp"
#include "engine_test_util.hpp"

using namespace conveyor;
using namespace conveyor::test;

namespace {

std::vector<float> dense_reference(std::vector<float> y, const sampling_params& p, const std::vector<token_id>& prompt,
                                   const std::vector<token_id>& output) {
  const size_t V = y.size();
  for (const auto& [t, b] : p.logit_bias) y[static_cast<size_t>(t)] += b;
  std::vector<float> counts(V, 0.0f);
  std::vector<bool> seen(V, false);
  for (token_id t : output) counts[static_cast<size_t>(t)] += 1.0f;
  for (token_id t : prompt) seen[static_cast<size_t>(t)] = true;
  for (size_t t = 0; t < V; ++t) {
    if (seen[t] || counts[t] > 0.0f) {
      const float r = p.repetition_penalty;
      y[t] = y[t] > 0.0f ? y[t] / r : y[t] * r;
    }
  }
  for (size_t t = 0; t < V; ++t) y[t] -= p.frequency_penalty * counts[t];
  for (size_t t = 0; t < V; ++t) y[t] -= p.presence_penalty * (counts[t] > 0.0f ? 1.0f : 0.0f);
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(logit_edits)

BOOST_AUTO_TEST_CASE(sparse_edits_equal_the_dense_reference_bit_for_bit) {
  std::mt19937_64 rng(7);
  const int32_t V = 300;
  std::normal_distribution<float> logit(0.0f, 4.0f);
  std::uniform_int_distribution<token_id> tok(0, V - 1);
  std::uniform_real_distribution<float> pen(-2.0f, 2.0f);
  for (int c = 0; c < 500; ++c) {
    BOOST_TEST_CONTEXT("case " << c) {
      sampling_params p;
      const int mode = c % 5;  // each alone, then all together
      if (mode == 0 || mode == 4) p.presence_penalty = pen(rng);
      if (mode == 1 || mode == 4) p.frequency_penalty = pen(rng);
      if (mode == 2 || mode == 4) p.repetition_penalty = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
      if (mode == 3 || mode == 4)
        for (token_id t = 0; t < V; t += std::uniform_int_distribution<token_id>(1, 40)(rng))
          p.logit_bias.emplace_back(t, std::uniform_real_distribution<float>(-100.0f, 100.0f)(rng));
      BOOST_TEST_REQUIRE(p.validate().empty(), p.validate());
      std::vector<token_id> prompt(std::uniform_int_distribution<size_t>(1, 60)(rng)), output(std::uniform_int_distribution<size_t>(0, 80)(rng));
      for (auto& t : prompt) t = tok(rng) % 50;  // small ranges: many repeats and overlaps
      for (auto& t : output) t = 25 + tok(rng) % 50;
      std::vector<float> raw(static_cast<size_t>(V));
      for (auto& x : raw) x = logit(rng);
      std::vector<logit_edit> edits;
      make_logit_edits(p, prompt, output, edits);
      for (size_t i = 1; i < edits.size(); ++i) BOOST_TEST(edits[i - 1].token < edits[i].token);
      std::vector<float> got = raw;
      apply_logit_edits(got, edits, p);
      BOOST_TEST(same_bits(got, dense_reference(raw, p, prompt, output)));
    }
  }
}

BOOST_AUTO_TEST_CASE(extending_token_by_token_equals_rebuilding) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<token_id> tok(0, 80);
  for (int c = 0; c < 200; ++c) {
    BOOST_TEST_CONTEXT("case " << c) {
      sampling_params p;
      const int mode = c % 5;
      if (mode == 0 || mode == 4) p.presence_penalty = 0.5f;
      if (mode == 1 || mode == 4) p.frequency_penalty = -0.25f;
      if (mode == 2 || mode == 4) p.repetition_penalty = 1.3f;
      if (mode == 3 || mode == 4) p.logit_bias = {{3, 1.0f}, {40, -2.0f}, {79, 5.0f}};
      std::vector<token_id> prompt(static_cast<size_t>(1 + c % 30)), output(static_cast<size_t>(c % 70));
      for (auto& t : prompt) t = tok(rng);
      for (auto& t : output) t = tok(rng);
      std::vector<logit_edit> kept, rebuilt;
      make_logit_edits(p, prompt, std::span<const token_id>(output).first(0), kept);
      for (size_t n = 1; n <= output.size(); ++n) {
        extend_logit_edits(p, std::span<const token_id>(output).subspan(n - 1, 1), kept);
        make_logit_edits(p, prompt, std::span<const token_id>(output).first(n), rebuilt);
        BOOST_REQUIRE_EQUAL(kept.size(), rebuilt.size());
        for (size_t i = 0; i < kept.size(); ++i) {
          BOOST_TEST(kept[i].token == rebuilt[i].token);
          BOOST_TEST(kept[i].count == rebuilt[i].count);
          BOOST_TEST(kept[i].repeated == rebuilt[i].repeated);
          BOOST_TEST(kept[i].bias == rebuilt[i].bias);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(nothing_to_edit_gives_no_edits) {
  sampling_params p;
  std::vector<logit_edit> edits{{1, 2.0f, 3, true}};
  make_logit_edits(p, std::vector<token_id>{1, 2, 3}, std::vector<token_id>{3, 3}, edits);
  BOOST_TEST(edits.empty());
  BOOST_TEST(!p.edits_logits());
  p.logit_bias = {{5, 1.0f}};
  BOOST_TEST(p.edits_logits());
  BOOST_TEST(!p.penalized());  // a bias does not depend on the tokens before
  make_logit_edits(p, std::vector<token_id>{1, 2, 3}, std::vector<token_id>{3, 3}, edits);
  BOOST_TEST_REQUIRE(edits.size() == 1u);
  BOOST_TEST((edits[0].token == 5 && edits[0].bias == 1.0f && edits[0].count == 0 && !edits[0].repeated));
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_field) {
  const auto why = [](auto&& set) {
    sampling_params p;
    set(p);
    return p.validate();
  };
  BOOST_TEST(why([](sampling_params& p) { p.presence_penalty = 2.5f; }).find("presence_penalty must be in [-2, 2]") == 0u);
  BOOST_TEST(why([](sampling_params& p) { p.frequency_penalty = -3.0f; }).find("frequency_penalty must be in [-2, 2]") == 0u);
  BOOST_TEST(why([](sampling_params& p) { p.repetition_penalty = 0.0f; }).find("repetition_penalty must be") == 0u);
  BOOST_TEST(why([](sampling_params& p) { p.repetition_penalty = NAN; }).find("repetition_penalty must be") == 0u);
  BOOST_TEST(why([](sampling_params& p) { p.logit_bias = {{3, 101.0f}}; }) == "logit_bias: the bias of token 3 must be in [-100, 100]");
  BOOST_TEST(why([](sampling_params& p) { p.logit_bias = {{-1, 1.0f}}; }) == "logit_bias: token id -1 must be >= 0");
  BOOST_TEST(why([](sampling_params& p) { p.logit_bias = {{3, 1.0f}, {3, 2.0f}}; }).find("distinct") != std::string::npos);
  BOOST_TEST(why([](sampling_params& p) { p.logit_bias.assign(max_logit_bias + 1, {0, 0.0f}); }).find("at most 300") != std::string::npos);
}

// A penalized sequence's next token depends on the one before: with a step in flight it is not
// planned ahead (a logit_bias alone is), and its edits count the output so far, a resumed job's
// earlier output (the end of its prompt) included.
BOOST_AUTO_TEST_CASE(penalized_sequences_wait_for_their_token_and_count_their_output) {
  scheduler_config sched;
  sched.max_model_len = 64;
  cache_config cache;
  cache.block_size = 4;
  conveyor::scheduler s(sched, cache, 32);
  request penalized = make_request(1, 4, 10, 50);
  penalized.sampling.frequency_penalty = 0.5f;
  penalized.prompt_token_ids.back() = 7;  // an earlier output token 7 ...
  penalized.resumed_output = 1;           // ... published before a restart
  request biased = make_request(2, 4, 10, 60);
  biased.sampling.logit_bias = {{9, -5.0f}};
  BOOST_TEST_REQUIRE(s.submit(penalized, 0.0).accepted);
  BOOST_TEST_REQUIRE(s.submit(biased, 0.0).accepted);
  const step_plan first = s.schedule(0.0);
  BOOST_TEST_REQUIRE(find_in(first, 1) != nullptr);
  const auto& e1 = find_in(first, 1)->logit_edits;
  BOOST_TEST_REQUIRE(e1.size() == 1u);  // token 7, once in the output
  BOOST_TEST((e1[0].token == 7 && e1[0].count == 1));
  BOOST_TEST(find_in(first, 2)->logit_edits.size() == 1u);
  const step_plan ahead = s.schedule(0.0);  // step 1 still in flight
  BOOST_TEST(find_in(ahead, 1) == nullptr);
  BOOST_TEST_REQUIRE(find_in(ahead, 2) != nullptr);
  BOOST_TEST(find_in(ahead, 2)->tokens[0] == k_previous_sample);
  BOOST_TEST(find_in(ahead, 2)->logit_edits.size() == 1u);
  s.update(fake_step(first, 7), 0.0);
  s.update(fake_step(ahead, 7), 0.0);
  const step_plan next = s.schedule(0.0);
  BOOST_TEST_REQUIRE(find_in(next, 1) != nullptr);
  const auto& e2 = find_in(next, 1)->logit_edits;
  BOOST_TEST_REQUIRE(e2.size() == 1u);
  BOOST_TEST(e2[0].count == 2);
}

BOOST_AUTO_TEST_SUITE_END()
