// The CUDA executor's fused decode GEMVs (gpu/fused_gemv.cu) end to end, against the CPU
// executor (lockstep.hpp: logits of every sampled row within 3e-2, the GPU's token equal to
// model::sample_token on its own logits): eight sequences prefill together (a step past
// kFusedMaxRows rows: cuBLASLt) and then decode in batches of 8 down to 1 as they finish (every
// row count the fused kernels take, graph buckets 8, 4, 2, 1 with padding rows; eager for llama), for
// each arch switch (llama with GQA, qwen2's biases and NEOX pairs, qwen3's head norms through
// the raw-output path); and the same steps with the fused kernels off (cuBLASLt at every T).
#include <boost/test/unit_test.hpp>

#include "gpu/cuda_executor.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

model::gguf_file fused_file(const std::string& arch) {
  model::tiny_llama_spec spec = model::tiny_config_a();
  spec.arch = arch;
  spec.weight_std = 0.1f;  // peaked attention: a wrong rotation or norm shows in the logits
  spec.n_head = 4;         // GQA: 2 query heads per KV head
  spec.n_head_kv = 2;
  if (arch == "qwen3") {
    spec.key_length = 64;  // head_dim 64 where n_embd / n_head is 24
    spec.norm_noise = 0.2f;
  }
  const std::string path = model::testing::temp_path("gpu_fused_" + arch + ".gguf");
  model::write_tiny_llama(path, spec);
  return model::gguf_file::open(path);
}

void decode_batches_shrinking(const model::gguf_file& f, bool graphs, bool fused, const std::string& what) {
  const int32_t V = model::llama_config::from_gguf(f).vocab_size;
  model::cpu_executor cpu(f, cpu_opts(4, 64));
  cuda_executor_options o = gpu_opts(4, 64, graphs);
  o.fused_decode = fused;
  cuda_executor gpu(f, o);
  std::vector<lock_seq> seqs(8);
  for (int32_t i = 0; i < 8; ++i) {
    seqs[size_t(i)].prompt = prompt_of(3 + 2 * i, V, i + 1);
    seqs[size_t(i)].max_new = 2 + i;  // decode batches 8, 7, ..., 1 at the end
  }
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, 8, rows);
  BOOST_TEST_MESSAGE(what << (graphs ? " graphs" : " eager") << (fused ? " fused" : " cuBLASLt") << ": " << rows
                          << " logit rows, worst relative error " << err);
  BOOST_TEST_CONTEXT(what << (graphs ? " graphs" : " eager") << (fused ? " fused" : " unfused")) {
    BOOST_TEST(rows == 44);  // 2 + 3 + ... + 9 sampled tokens
    BOOST_TEST(err < 3e-2, "relative logit error " << err);
    BOOST_TEST(gpu.last_step_fused() == fused);  // the last step: one sequence decoding
    BOOST_TEST(gpu.last_split().graph == graphs);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_executor_fused, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(fused_decode_on_every_arch) {
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    auto f = fused_file(arch);
    decode_batches_shrinking(f, true, true, arch);
    if (arch == "llama") decode_batches_shrinking(f, false, true, arch);  // eager: the same kernels, launched directly
  }
}

BOOST_AUTO_TEST_CASE(small_steps_without_the_fused_kernels) {
  auto f = fused_file("llama");
  for (bool graphs : {true, false}) decode_batches_shrinking(f, graphs, false, "llama");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
