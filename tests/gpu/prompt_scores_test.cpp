// Prompt logprobs on the CUDA executor (scheduled_seq::prompt_targets): every scored row's
// logprob of the prompt token after it, and its alternatives, against the CPU executor's on the
// same plans: a prompt in two chunks (the second sampling), beside a sequence that only samples,
// with more scored rows than one pass of the LM head holds (max_num_seqs rows at a time).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "gpu/cuda_executor.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "prompt_plan.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

// The two steps on `ex`: the scores of sequence 1, in prompt order, and the sampled tokens.
template <class Executor>
std::pair<std::vector<sampled_token>, std::vector<token_id>> run(Executor& ex, const std::vector<token_id>& prompt,
                                                                 const std::vector<token_id>& other) {
  std::vector<sampled_token> scores;
  std::vector<token_id> sampled;
  const int32_t cut = 11;
  for (int32_t step = 0; step < 2; ++step) {
    step_plan plan;
    plan.step_id = static_cast<uint64_t>(step);
    plan.seqs.push_back(conveyor::testing::scored_chunk(1, prompt, step == 0 ? 0 : cut, step == 0 ? cut : static_cast<int32_t>(prompt.size()),
                                 {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 3));
    if (step == 0) plan.seqs.push_back(conveyor::testing::scored_chunk(2, other, 0, static_cast<int32_t>(other.size()), {20, 21}, 0));
    const step_result r = ex.step(plan);
    for (const sampled_token& t : r.prompt_scores)
      if (t.id == 1) scores.push_back(t);
    for (const sampled_token& t : r.sampled) sampled.push_back(t.token);
  }
  return {scores, sampled};
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_prompt_scores, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(prompt_scores_equal_the_cpu_executors) {
  const std::string path = model::testing::temp_path("gpu_scores.gguf");
  model::write_tiny_llama(path, model::tiny_config_b());
  auto f = model::gguf_file::open(path);
  const int32_t V = 512;  // tiny_config_b's vocabulary
  const auto prompt = prompt_of(37, V, 3), other = prompt_of(6, V, 4);
  model::cpu_executor cpu(f, cpu_opts(4, 64));
  cuda_executor_options o = gpu_opts(4, 64, false);
  o.max_num_seqs = 8;  // 36 scored rows: five passes of the LM head
  cuda_executor gpu(f, o);
  const auto [want, want_sampled] = run(cpu, prompt, other);
  const auto [got, got_sampled] = run(gpu, prompt, other);
  BOOST_REQUIRE(want.size() == prompt.size() - 1);
  BOOST_REQUIRE(got.size() == want.size());
  BOOST_TEST(got_sampled.size() == 2u);
  double worst = 0.0, spread = 0.0;
  for (size_t p = 0; p < got.size(); ++p) {
    BOOST_TEST_CONTEXT("prompt token " << p + 1) {
      BOOST_TEST(got[p].token == prompt[p + 1]);
      worst = std::max(worst, static_cast<double>(std::abs(got[p].logprob - want[p].logprob)));
      if (p > 0) spread = std::max(spread, static_cast<double>(std::abs(want[p].logprob - want[p - 1].logprob)));
      BOOST_REQUIRE(got[p].top.size() == 3u);
      BOOST_TEST(got[p].top[0].logprob >= got[p].top[1].logprob);
      BOOST_TEST(got[p].top[1].logprob >= got[p].top[2].logprob);
      BOOST_TEST(std::abs(got[p].top[0].logprob - want[p].top[0].logprob) < 5e-2);
    }
  }
  BOOST_TEST_MESSAGE("GPU vs CPU prompt logprobs: max |diff| " << worst << "; neighbouring rows differ by up to " << spread);
  BOOST_TEST(worst < 5e-2);
  BOOST_TEST(spread > 10 * worst);  // the bound tells rows apart: a score from the wrong row fails
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
