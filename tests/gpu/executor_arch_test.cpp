// The CUDA executor on every architecture switch of model/formats/llama_config.hpp, each against the CPU
// executor on a tiny random model (lockstep.hpp: logits of every sampled row within 3e-2, the
// GPU's token equal to model::sample_token on its own logits, graphs and eager): qwen2 (QKV bias,
// NEOX pairs), qwen3 (q/k head norms, head_dim != n_embd / n_head), linear RoPE scaling on top of
// rope_freqs divisors; plus the random-weight constructor (gpu-bench) for each arch. Weights of
// std 0.1 and random tokens make attention peaked, so a wrong rotation or norm moves the logits
// well past the bound (weights of std 0.02 average it away).
#include <boost/test/unit_test.hpp>

#include "gpu/cuda_executor.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

model::gguf_file arch_file(const std::string& name, const model::tiny_llama_spec& spec) {
  const std::string path = model::testing::temp_path("gpu_arch_" + name + ".gguf");
  model::write_tiny_llama(path, spec);
  return model::gguf_file::open(path);
}

model::tiny_llama_spec peaked(const std::string& arch) {
  model::tiny_llama_spec spec = model::tiny_config_a();
  spec.arch = arch;
  spec.weight_std = 0.1f;
  return spec;
}

std::vector<token_id> random_prompt(int32_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<token_id> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(3 + static_cast<token_id>(rng() % static_cast<uint32_t>(vocab - 3)));
  return t;
}

// Three sequences (a 40-token prompt in chunks of 16, a 70-token prompt at once joining at step
// 1, a short one) decoding 5 tokens each, graphs and eager.
void lockstep_both(const model::gguf_file& f, const std::string& what) {
  const int32_t V = model::llama_config::from_gguf(f).vocab_size;
  for (bool graphs : {true, false}) {
    model::cpu_executor cpu(f, cpu_opts(8, 64));
    cuda_executor gpu(f, gpu_opts(8, 64, graphs));
    std::vector<lock_seq> seqs(3);
    seqs[0].prompt = random_prompt(40, V, 1);
    seqs[0].chunk = 16;
    seqs[1].prompt = random_prompt(70, V, 2);
    seqs[1].start_step = 1;
    seqs[2].prompt = random_prompt(6, V, 3);
    for (auto& s : seqs) s.max_new = 5;
    int32_t rows = 0;
    const double err = lockstep(cpu, gpu, seqs, 16, rows);
    BOOST_TEST_MESSAGE(what << (graphs ? " (graphs)" : " (eager)") << ": " << rows << " logit rows, worst relative error "
                            << err);
    BOOST_TEST(err < 3e-2, what << (graphs ? " graphs" : " eager") << ": relative logit error " << err);
    BOOST_TEST(gpu.last_split().graph == graphs);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_executor_archs, *boost::unit_test::precondition(have_gpu))

// Biases of std 0.5 (the fixture's) next to weights of 0.1: a missing or misplaced bias is a
// large error in Q, K and V alike.
BOOST_AUTO_TEST_CASE(qwen2_qkv_bias_and_neox_rope) {
  auto f = arch_file("qwen2", peaked("qwen2"));
  const model::llama_config c = model::llama_config::from_gguf(f);
  BOOST_REQUIRE(c.qkv_bias && c.rope == model::rope_pairs::neox);
  lockstep_both(f, "qwen2");
}

// head_dim 64 where n_embd / n_head is 32: Wq is (192, 96), Wo (96, 192). Norm weights of std
// 0.2 so that the q/k norms' weights, not only their scaling, show.
BOOST_AUTO_TEST_CASE(qwen3_qk_norm_and_key_length) {
  model::tiny_llama_spec spec = peaked("qwen3");
  spec.key_length = 64;
  spec.norm_noise = 0.2f;
  auto f = arch_file("qwen3", spec);
  const model::llama_config c = model::llama_config::from_gguf(f);
  BOOST_REQUIRE(c.qk_norm && c.head_dim == 64 && c.rope == model::rope_pairs::neox);
  lockstep_both(f, "qwen3");
}

// Linear scaling (factor 4) over llama3-style rope_freqs divisors, adjacent pairs.
BOOST_AUTO_TEST_CASE(llama_linear_rope_scaling_with_rope_freqs) {
  model::tiny_llama_spec spec = peaked("llama");
  spec.rope_linear_factor = 4.0f;
  spec.rope_freqs = true;
  auto f = arch_file("llama_linear", spec);
  const model::llama_config c = model::llama_config::from_gguf(f);
  BOOST_REQUIRE(c.rope_freq_scale == 0.25f && c.has_rope_freqs && c.rope == model::rope_pairs::norm);
  lockstep_both(f, "llama, linear RoPE x4 + rope_freqs");
}

// The random-weight constructor (gpu-bench, --dummy) carves and fills the biases and head norms.
BOOST_AUTO_TEST_CASE(dummy_weights_for_every_arch) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    model::llama_config c;
    c.arch = arch;
    c.name = std::string("dummy-") + arch;
    c.n_embd = 128;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.head_dim = 64;  // != n_embd / n_head
    c.n_ff = 256;
    c.vocab_size = 300;
    c.n_ctx_train = 128;
    c.n_rot = 64;
    c.rope = std::string(arch) == "llama" ? model::rope_pairs::norm : model::rope_pairs::neox;
    c.qkv_bias = std::string(arch) == "qwen2";
    c.qk_norm = std::string(arch) == "qwen3";
    c.rope_freq_scale = 0.5f;
    cuda_executor gpu(c, gpu_opts(8, 16, true));
    scheduled_seq q;
    q.id = 1;
    q.tokens = prompt_of(12, c.vocab_size, 4);
    q.block_table = {0, 1};
    q.sample = true;
    step_plan p;
    p.seqs.push_back(q);
    const step_result r = gpu.step(p);
    BOOST_TEST_CONTEXT(arch) {
      BOOST_TEST(r.sampled.size() == 1u);
      BOOST_TEST(all_finite(gpu.last_logits()));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
