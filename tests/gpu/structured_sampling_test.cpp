// Structured outputs, logit edits and top logprobs on the CUDA executor: a sampled row with a
// constraint, logit edits (logit_bias, penalties) or top_logprobs is drawn on the host from the
// GPU's own logits, by the CPU's sampler, inside the constraint's mask and after the edits; its
// logprob and alternatives are those of the unedited logits.
#include <boost/test/unit_test.hpp>

#include <functional>

#include "gpu/cuda_executor.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/cpu/sampler.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

// Allows a fixed set of tokens; counts the masks asked for.
struct fixed_constraint final : token_constraint {
  std::vector<token_id> allowed;
  int32_t vocab = 0, fills = 0;
  void fill_mask(std::vector<uint32_t>& mask) override {
    ++fills;
    mask.assign(static_cast<size_t>((vocab + 31) / 32), 0u);
    for (token_id t : allowed) mask[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
  }
  bool accept(token_id) override { return true; }
  bool terminated() const override { return false; }
  void rollback(int32_t) override {}
};

constexpr int32_t V = 512;  // tiny_config_b's vocabulary

// Three sampled rows of 6 prompt tokens each; `set` gives row i its sampling and extras.
step_plan three_rows(const std::function<void(scheduled_seq&, int32_t)>& set) {
  step_plan plan;
  plan.step_id = 1;
  for (int32_t i = 0; i < 3; ++i) {
    scheduled_seq& s = plan.seqs.emplace_back();
    s.id = static_cast<seq_id>(i + 1);
    s.tokens = prompt_of(6, V, i);
    s.block_table = {2 * i, 2 * i + 1};
    s.sample = true;
    set(s, i);
  }
  return plan;
}

// One step of `plan` on a fresh executor over tiny_config_b; the result and the step's logits.
std::pair<step_result, std::vector<float>> run_tiny(const step_plan& plan, const char* file) {
  const std::string path = model::testing::temp_path(file);
  model::write_tiny_llama(path, model::tiny_config_b());
  auto f = model::gguf_file::open(path);
  cuda_executor gpu(f, gpu_opts(4, 64, false));
  step_result r = gpu.step(plan);
  return {std::move(r), gpu.last_logits()};
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_structured_sampling, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(masked_rows_and_top_logprobs_come_from_the_gpus_logits) {
  auto c = std::make_shared<fixed_constraint>();
  c->allowed = {5, 17, 300, 511};
  c->vocab = V;
  const step_plan plan = three_rows([&](scheduled_seq& s, int32_t i) {
    s.sampling.temperature = i == 0 ? 0.0f : 1.0f;
    s.sampling.seed = 9;
    s.sampling.top_logprobs = i == 2 ? 0 : 4;  // row 2: the device's own draw, no alternatives
    if (i < 2) s.constraint = c;
  });
  const auto [r, logits] = run_tiny(plan, "structured.gguf");
  BOOST_TEST_REQUIRE(r.sampled.size() == 3u);
  BOOST_TEST(c->fills == 2);
  model::sampler_scratch scratch;
  for (size_t i = 0; i < 3; ++i) {
    std::span<const float> row(&logits[i * V], static_cast<size_t>(V));
    std::vector<uint32_t> mask;
    if (i < 2) c->fill_mask(mask);
    const auto want = model::sample_token(row, plan.seqs[i].sampling, 6, scratch, mask);
    BOOST_TEST(r.sampled[i].token == want.token, "row " << i);
    if (i < 2) BOOST_TEST((std::find(c->allowed.begin(), c->allowed.end(), r.sampled[i].token) != c->allowed.end()));
    std::vector<token_logprob> top;
    model::top_logprobs(row, plan.seqs[i].sampling.top_logprobs, top, scratch);
    BOOST_TEST_REQUIRE(r.sampled[i].top.size() == top.size());
    for (size_t k = 0; k < top.size(); ++k) {
      BOOST_TEST(r.sampled[i].top[k].token == top[k].token);
      BOOST_TEST(std::abs(r.sampled[i].top[k].logprob - top[k].logprob) < 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(rows_with_logit_edits_are_drawn_on_the_host_after_the_edits) {
  const step_plan plan = three_rows([](scheduled_seq& s, int32_t i) {
    s.sampling.temperature = i == 0 ? 0.0f : 1.0f;
    s.sampling.seed = 21;
    if (i == 0) s.sampling.logit_bias = {{123, 100.0f}};  // greedy: 123 wins
    if (i == 1) {
      s.sampling.repetition_penalty = 1.7f;
      s.sampling.presence_penalty = 1.0f;
      s.sampling.logit_bias = {{7, -100.0f}};
    }
    // Row 2 has none: the device draws it.
    std::vector<token_id> prompt(s.tokens.begin(), s.tokens.begin() + 3), output(s.tokens.begin() + 3, s.tokens.end());
    make_logit_edits(s.sampling, prompt, output, s.logit_edits);
  });
  BOOST_TEST(plan.seqs[2].logit_edits.empty());
  const auto [r, logits] = run_tiny(plan, "edits.gguf");
  BOOST_TEST_REQUIRE(r.sampled.size() == 3u);
  BOOST_TEST(r.sampled[0].token == 123);
  model::sampler_scratch scratch;
  for (size_t i = 0; i < 2; ++i) {
    std::span<const float> row(&logits[i * V], static_cast<size_t>(V));
    const auto want = model::sample_token(row, plan.seqs[i].sampling, 6, scratch, {}, plan.seqs[i].logit_edits);
    BOOST_TEST(r.sampled[i].token == want.token, "row " << i);
    BOOST_TEST(std::abs(r.sampled[i].logprob - want.logprob) < 1e-5, "row " << i);  // the unedited distribution
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
