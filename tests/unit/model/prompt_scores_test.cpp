// Prompt logprobs on the CPU executor (scheduled_seq::prompt_targets): each scored row's logprob
// of the prompt token after it equals the double-precision reference forward over that prefix,
// in whatever chunks the prompt comes, beside a sequence that only samples.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "prompt_plan.hpp"
#include "reference_forward.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

double reference_logprob(const gguf_file& f, const std::vector<token_id>& prefix, token_id next) {
  const std::vector<double> lg = reference_logits(f, prefix, false);
  const double mx = *std::max_element(lg.begin(), lg.end());
  double sum = 0.0;
  for (double x : lg) sum += std::exp(x - mx);
  return lg[static_cast<size_t>(next)] - mx - std::log(sum);
}

} // namespace

BOOST_AUTO_TEST_SUITE(cpu_prompt_scores)

BOOST_AUTO_TEST_CASE(scores_equal_the_reference_in_any_chunking) {
  const std::string path = testing::temp_path("scores.gguf");
  write_tiny_llama(path, tiny_config_a());
  auto f = gguf_file::open(path);
  cpu_executor_options o;
  o.block_size = 4;
  o.num_kv_blocks = 32;
  o.match_llama_cpp = false;
  o.math = cpu_math::exact;
  const int32_t vocab = static_cast<int32_t>(tiny_vocab(tiny_config_a()).size());
  std::vector<token_id> prompt;
  for (int32_t i = 0; i < 13; ++i) prompt.push_back(3 + (i * 29 + 7) % (vocab - 3));
  const std::vector<token_id> other{5, 9, 11};
  for (const std::vector<int32_t>& cuts : {std::vector<int32_t>{0, 13}, std::vector<int32_t>{0, 5, 12, 13}}) {
    BOOST_TEST_CONTEXT("chunks ending at " << cuts[1] << (cuts.size() > 2 ? " ..." : "")) {
      cpu_executor ex(f, o);
      std::vector<sampled_token> scores;
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        step_plan plan;
        plan.step_id = c;
        plan.seqs.push_back(conveyor::testing::scored_chunk(1, prompt, cuts[c], cuts[c + 1], {0, 1, 2, 3}, 3));
        if (c == 0) plan.seqs.push_back(conveyor::testing::scored_chunk(2, other, 0, 3, {8}, 0));  // samples, scores its own 2
        const step_result r = ex.step(plan);
        BOOST_TEST(r.sampled.size() == static_cast<size_t>(plan.seqs.size() - (plan.seqs[0].sample ? 0 : 1)));
        for (const sampled_token& t : r.prompt_scores)
          if (t.id == 1) scores.push_back(t);
          else BOOST_TEST(t.top.empty());
      }
      BOOST_REQUIRE(scores.size() == prompt.size() - 1);
      for (size_t p = 0; p < scores.size(); ++p) {
        BOOST_TEST_CONTEXT("prompt token " << p + 1) {
          BOOST_TEST(scores[p].token == prompt[p + 1]);
          const std::vector<token_id> prefix(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(p) + 1);
          BOOST_TEST(std::abs(scores[p].logprob - reference_logprob(f, prefix, prompt[p + 1])) < 1e-3);
          BOOST_REQUIRE(scores[p].top.size() == 3u);
          BOOST_TEST(scores[p].top[0].logprob >= scores[p].top[1].logprob);
          BOOST_TEST(scores[p].top[1].logprob >= scores[p].top[2].logprob);
          BOOST_TEST(scores[p].top[0].logprob >= scores[p].logprob - 1e-6);
          BOOST_TEST(std::abs(scores[p].top[0].logprob - reference_logprob(f, prefix, scores[p].top[0].token)) < 1e-3);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(more_targets_than_rows_is_a_malformed_plan) {
  const std::string path = testing::temp_path("scores_bad.gguf");
  write_tiny_llama(path, tiny_config_a());
  auto f = gguf_file::open(path);
  cpu_executor_options o;
  o.block_size = 4;
  o.num_kv_blocks = 4;
  cpu_executor ex(f, o);
  step_plan plan;
  plan.seqs.push_back(conveyor::testing::scored_chunk(1, {4, 5, 6}, 0, 3, {0}, 0));
  plan.seqs[0].prompt_targets = {5, 6, 7, 8};
  BOOST_CHECK_THROW(ex.step(plan), std::invalid_argument);
  plan.seqs[0].prompt_targets = {5, 100000};
  BOOST_CHECK_THROW(ex.step(plan), std::invalid_argument);
  plan.seqs[0].prompt_targets = {5, 6};
  BOOST_TEST(ex.step(plan).prompt_scores.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::model
