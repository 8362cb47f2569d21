// The CUDA executor against the CPU executor: logits of every step, teacher-forced with the
// CPU's greedy tokens (prompt chunks, mixed steps, decode-only steps that replay CUDA graphs),
// on tiny random models and on SmolLM2; then SmolLM2's free-running greedy tokens for 32 steps
// on the golden prompts, with any divergence reported next to the CPU's top-2 margin there.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu/cuda_executor.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {

BOOST_AUTO_TEST_SUITE(gpu_executor, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(tiny_models_logits_equal_cpu) {
  for (int config = 0; config < 2; ++config) {
    model::tiny_llama_spec spec = config == 0 ? model::tiny_config_a() : model::tiny_config_b();
    const std::string path = model::testing::temp_path("gpu_tiny_" + std::to_string(config) + ".gguf");
    model::write_tiny_llama(path, spec);
    auto f = model::gguf_file::open(path);
    const int32_t V = static_cast<int32_t>(model::tiny_vocab(spec).size());
    for (bool graphs : {true, false}) {
      model::cpu_executor cpu(f, cpu_opts(4, 64));
      cuda_executor gpu(f, gpu_opts(4, 64, graphs));
      std::vector<lock_seq> seqs(3);
      seqs[0].prompt = prompt_of(23, V, 0);
      seqs[1].prompt = prompt_of(9, V, 1);
      seqs[1].chunk = 4;
      seqs[1].start_step = 1;
      seqs[2].prompt = prompt_of(30, V, 2);
      seqs[2].chunk = 7;
      seqs[2].start_step = 2;
      int32_t rows = 0;
      const double err = lockstep(cpu, gpu, seqs, 16, rows);
      BOOST_TEST_MESSAGE("tiny config " << config << (graphs ? " (graphs)" : " (eager)") << ": " << rows
                                        << " logit rows, worst relative error " << err);
      BOOST_TEST(err < 3e-2, "config " << config << " graphs " << graphs << ": relative logit error " << err);
    }
  }
}

BOOST_AUTO_TEST_CASE(smollm2_logits_equal_cpu, *boost::unit_test::precondition(native_gpu_only)) {
  auto f = model::gguf_file::open(model::testing::smollm2_path());
  model::cpu_executor cpu(f, cpu_opts(16, 64));
  cuda_executor gpu(f, gpu_opts(16, 64, true));
  std::vector<lock_seq> seqs(2);
  seqs[0].prompt = {504, 1463, 282, 260, 7510, 1757, 5634, 281};
  seqs[0].max_new = 8;
  seqs[1].prompt = prompt_of(40, 49152, 3);
  seqs[1].chunk = 16;
  seqs[1].max_new = 8;
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, 4, rows);
  BOOST_TEST_MESSAGE("SmolLM2: " << rows << " logit rows, worst relative error " << err);
  BOOST_TEST(err < 5e-2, "relative logit error " << err);
}

BOOST_AUTO_TEST_CASE(smollm2_greedy_tokens_equal_cpu, *boost::unit_test::precondition(native_gpu_only)) {
  std::ifstream in(test_data_dir() + "/smollm2_greedy.json");
  BOOST_REQUIRE_MESSAGE(in, "tests/data/smollm2_greedy.json missing");
  const auto golden = nlohmann::json::parse(in);
  auto f = model::gguf_file::open(model::testing::smollm2_path());
  model::cpu_executor_options co;
  co.num_kv_blocks = 64;
  co.math = model::cpu_math::exact;  // the goldens' numerics: f32 activations
  model::cpu_executor cpu(f, co);
  cuda_executor gpu(f, gpu_opts(16, 64, true));
  const int32_t V = cpu.info().vocab_size, n_tokens = 32;
  int32_t exact = 0;
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<token_id>>();
    std::vector<token_id> out[2];
    std::vector<float> margins;  // the CPU's top-2 logit margin at each step
    for (int which = 0; which < 2; ++which) {
      executor& ex = which == 0 ? static_cast<executor&>(cpu) : static_cast<executor&>(gpu);
      scheduled_seq q;
      q.id = 1;
      q.sampling.temperature = 0.0f;
      q.sample = true;
      for (int32_t b = 0; b < 8; ++b) q.block_table.push_back(b);
      q.tokens = prompt;
      while (static_cast<int32_t>(out[which].size()) < n_tokens) {
        step_plan p;
        p.seqs.push_back(q);
        out[which].push_back(ex.step(p).sampled.at(0).token);
        if (which == 0) {
          std::vector<float> l(cpu.last_logits().begin(), cpu.last_logits().begin() + V);
          std::partial_sort(l.begin(), l.begin() + 2, l.end(), std::greater<float>());
          margins.push_back(l[0] - l[1]);
        }
        q.num_computed_tokens += static_cast<int32_t>(q.tokens.size());
        q.tokens = {out[which].back()};
      }
    }
    size_t i = 0;
    while (i < out[0].size() && out[0][i] == out[1][i]) ++i;
    if (i == out[0].size()) {
      ++exact;
      continue;
    }
    BOOST_TEST_MESSAGE("prompt " << c["name"].get<std::string>() << ": GPU diverges from the CPU at token " << i << " (GPU "
                                 << out[1][i] << ", CPU " << out[0][i] << "); the CPU's top-2 margin there is " << margins[i]);
    BOOST_TEST(margins[i] < 0.5, "divergence at token " << i << " where the CPU's margin is " << margins[i]
                                                          << " (bf16 rounding should only flip near-ties)");
  }
  BOOST_TEST_MESSAGE(exact << " of " << golden["cases"].size() << " prompts: 32 greedy tokens equal to the CPU executor's");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
