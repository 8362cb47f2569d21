// The CUDA executor in the situations a serving run meets, each against the CPU executor (logits
// of every sampled row, and the GPU's token equal to model::sample_token on the GPU's own
// logits): every block size 1..32, decode batches that are not a graph bucket (padding rows, also
// with every block of the pool in use), non-greedy sampling, contexts past 1024 through the
// split-and-combine path (graph and eager), 64 sequences per step, a Llama-3-shaped model
// (head_dim 128, vocab 128256, llama3 RoPE divisors, prompt chunks on the tensor-core attention
// kernel), and plans past the executor's capacities.
#include <boost/test/unit_test.hpp>

#include "gpu/cuda_executor.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

model::gguf_file tiny_file(const std::string& name, const model::tiny_llama_spec& spec) {
  const std::string path = model::testing::temp_path(name + ".gguf");
  model::write_tiny_llama(path, spec);
  return model::gguf_file::open(path);
}

sampling_params sp(float t, int32_t k, float top_p, float min_p, uint64_t seed) {
  sampling_params p;
  p.temperature = t;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_executor_cases, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(every_block_size_from_1_to_32) {
  auto f = tiny_file("blocks", model::tiny_config_a());
  const int32_t V = 269;
  for (int32_t bs : {1, 2, 3, 4, 8, 16, 32}) {
    const int32_t per_seq = (40 + bs - 1) / bs, blocks = std::max(64, 2 * per_seq);
    model::cpu_executor cpu(f, cpu_opts(bs, blocks));
    cuda_executor gpu(f, gpu_opts(bs, blocks, true));
    std::vector<lock_seq> seqs(2);
    seqs[0].prompt = prompt_of(19, V, 1);
    seqs[1].prompt = prompt_of(27, V, 2);
    seqs[1].chunk = 10;
    seqs[0].max_new = seqs[1].max_new = 4;
    int32_t rows = 0;
    const double err = lockstep(cpu, gpu, seqs, per_seq, rows);
    BOOST_TEST(err < 3e-2, "block_size " << bs << ": relative logit error " << err);
  }
}

BOOST_AUTO_TEST_CASE(padding_rows_and_non_greedy_sampling) {
  auto f = tiny_file("padding", model::tiny_config_b());
  const int32_t V = 512;
  const std::vector<sampling_params> params{sp(0.0f, 0, 1.0f, 0.0f, 1), sp(0.8f, 0, 1.0f, 0.0f, 2), sp(1.0f, 20, 1.0f, 0.0f, 3),
                                            sp(1.0f, 0, 0.9f, 0.0f, 4),  sp(1.2f, 0, 1.0f, 0.05f, 5), sp(0.7f, 40, 0.95f, 0.02f, 6)};
  for (bool graphs : {true, false}) {
    model::cpu_executor cpu(f, cpu_opts(4, 64));
    cuda_executor gpu(f, gpu_opts(4, 64, graphs));
    std::vector<lock_seq> seqs(6);  // decode batches of 5 and 6 (buckets 8): padding rows in every graph step
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].prompt = prompt_of(5 + static_cast<int32_t>(i), V, static_cast<int32_t>(i));
      seqs[i].sampling = params[i];
      seqs[i].start_step = i == 5 ? 2 : 0;
      seqs[i].max_new = 5;
    }
    int32_t rows = 0;
    const double err = lockstep(cpu, gpu, seqs, 8, rows);
    BOOST_TEST(err < 3e-2, (graphs ? "graphs" : "eager") << ": relative logit error " << err);
    BOOST_TEST(gpu.last_split().graph == graphs);
  }
}

// Every block of the pool in use while graph steps carry padding rows: the padding rows' K/V
// must land in the sink past the pool, not in a block a sequence owns (here the last one).
BOOST_AUTO_TEST_CASE(padding_rows_with_the_whole_pool_in_use) {
  auto f = tiny_file("full_pool", model::tiny_config_b());
  const int32_t V = 512, per_seq = 4, n_seqs = 3, blocks = per_seq * n_seqs;
  model::cpu_executor cpu(f, cpu_opts(4, blocks));
  cuda_executor gpu(f, gpu_opts(4, blocks, true));
  std::vector<lock_seq> seqs(n_seqs);  // decode batches of 3 (bucket 4: one padding row per step)
  for (int32_t i = 0; i < n_seqs; ++i) {
    seqs[size_t(i)].prompt = prompt_of(12, V, 20 + i);  // positions 12..15 fill each sequence's last block
    seqs[size_t(i)].max_new = 4;
  }
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, per_seq, rows);
  BOOST_TEST(rows == n_seqs * 4);
  BOOST_TEST(err < 3e-2, "relative logit error " << err);
  BOOST_TEST(gpu.last_split().graph);
}

// One sequence: a prompt of `len` tokens in chunks of 128, then 3 decodes, in lockstep with the
// CPU executor (16-token blocks, `blocks` of them); returns how the last decode split its context.
cuda_executor::split_info one_sequence_decodes(const model::gguf_file& f, int32_t len, int32_t blocks, bool graphs) {
  model::cpu_executor cpu(f, cpu_opts(16, blocks));
  cuda_executor gpu(f, gpu_opts(16, blocks, graphs));
  std::vector<lock_seq> seqs(1);
  seqs[0].prompt = prompt_of(len, 269, 7);
  seqs[0].chunk = 128;
  seqs[0].max_new = 3;
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, blocks, rows);
  BOOST_TEST(err < 3e-2, (graphs ? "graphs" : "eager") << ": relative logit error " << err);
  BOOST_TEST(gpu.last_split().graph == graphs);
  return gpu.last_split();
}

BOOST_AUTO_TEST_CASE(long_contexts_through_the_split_combine) {
  model::tiny_llama_spec spec = model::tiny_config_a();
  spec.n_ctx = 65536;  // a long-context model: the graph split must still follow the real context
  auto f = tiny_file("long", spec);
  for (bool graphs : {true, false}) {
    const auto s = one_sequence_decodes(f, 1100, 80, graphs);  // the last decode, at context 1102
    BOOST_TEST(s.active() >= 2, "a decode at context " << s.max_ctx << " ran on " << s.active() << " split(s) of " << s.split_len);
  }
}

// A long context where every position counts: random tokens (no period for the average over the
// context to hide behind), weights large enough for peaked attention, llama3 RoPE divisors (their
// low frequencies only turn appreciably far from position 0); eager, so the executor's own split
// policy cuts the context.
BOOST_AUTO_TEST_CASE(long_context_with_peaked_attention_and_llama3_rope) {
  model::tiny_llama_spec spec = model::tiny_config_a();
  spec.n_ctx = 4096;
  spec.rope_theta = 10000.0f;
  spec.rope_freqs = true;
  spec.weight_std = 0.1f;
  auto f = tiny_file("long_peaked", spec);
  const int32_t V = 269, len = 1100;
  model::cpu_executor cpu(f, cpu_opts(16, 80));
  cuda_executor gpu(f, gpu_opts(16, 80, false));
  std::vector<lock_seq> seqs(1);
  std::mt19937 rng(11);
  for (int32_t i = 0; i < len; ++i) seqs[0].prompt.push_back(3 + static_cast<token_id>(rng() % (V - 3)));
  seqs[0].chunk = 128;
  seqs[0].max_new = 3;
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, 80, rows);
  BOOST_TEST_MESSAGE("long context, peaked attention: relative logit error " << err);
  BOOST_TEST(err < 3e-2, "relative logit error " << err);
  BOOST_TEST(gpu.last_split().active() >= 2);
}

// Short contexts split too when a step has few tiles. On an H200 (docs/gpu.md §8) one decode at
// context 1030 ran on 3 splits of 352 positions, 24 CTAs for 132 SMs, and below 1024 positions
// on none; the policy now cuts 64-position splits until ~2 CTAs per SM. A decode at context 202:
// 4 splits, graphs and eager, equal to the CPU.
BOOST_AUTO_TEST_CASE(short_decodes_split_to_fill_the_device) {
  auto f = tiny_file("short_split", model::tiny_config_a());
  for (bool graphs : {true, false}) {
    const auto s = one_sequence_decodes(f, 200, 40, graphs);  // the last decode, at context 202
    BOOST_TEST(s.split_len == 64);
    BOOST_TEST(s.active() == 4, "a decode at context " << s.max_ctx << " ran on " << s.active() << " split(s) of " << s.split_len);
  }
}

BOOST_AUTO_TEST_CASE(sixty_four_sequences_per_step) {
  auto f = tiny_file("seqs64", model::tiny_config_a());
  const int32_t V = 269;
  model::cpu_executor cpu(f, cpu_opts(4, 64 * 3));
  cuda_executor_options o = gpu_opts(4, 64 * 3, true);
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 512;
  cuda_executor gpu(f, o);
  std::vector<lock_seq> seqs(64);
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].prompt = prompt_of(3 + static_cast<int32_t>(i % 5), V, static_cast<int32_t>(i));
    seqs[i].max_new = 3;
    if (i % 3 == 1) seqs[i].sampling = sp(0.9f, 30, 0.9f, 0.0f, i);
  }
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, 3, rows);
  BOOST_TEST(rows == 64 * 3);
  BOOST_TEST(err < 3e-2, "relative logit error " << err);
  BOOST_TEST(gpu.last_split().graph);  // batch 64: the largest bucket
}

BOOST_AUTO_TEST_CASE(llama3_shaped_model_end_to_end) {
  model::tiny_llama_spec spec;
  spec.n_embd = 256;
  spec.n_head = 2;  // head_dim 128 as Llama-3
  spec.n_head_kv = 1;
  spec.n_ff = 512;
  spec.n_vocab = 128256;
  spec.n_ctx = 8192;
  spec.rope_theta = 500000.0f;
  spec.rope_freqs = true;
  spec.tied = false;
  spec.output = model::ggml_type::q8_0;
  auto f = tiny_file("llama3", spec);
  model::cpu_executor cpu(f, cpu_opts(16, 16));
  cuda_executor gpu(f, gpu_opts(16, 16, true));
  std::vector<lock_seq> seqs(3);
  seqs[0].prompt = prompt_of(21, spec.n_vocab, 1);
  seqs[1].prompt = prompt_of(9, spec.n_vocab, 2);
  seqs[1].sampling = sp(0.8f, 50, 0.95f, 0.0f, 42);
  seqs[2].prompt = prompt_of(40, spec.n_vocab, 3);  // chunks of 17, 17, 6: two start mid-context
  seqs[2].chunk = 17;
  seqs[2].start_step = 1;
  seqs[0].max_new = seqs[1].max_new = seqs[2].max_new = 3;
#if defined(CONVEYOR_CUDA_EMU)
  conveyor_emu::clear_launch_log();
#endif
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, 4, rows);
  BOOST_TEST(err < 3e-2, "relative logit error " << err);
#if defined(CONVEYOR_CUDA_EMU)  // the prompt chunks ran on tensor cores (the emulator's launch log)
  int wmma_launches = 0;
  for (const auto& l : conveyor_emu::launch_log()) wmma_launches += l.kernel.find("paged_attention_wmma_kernel") == 0;
  BOOST_TEST(wmma_launches >= 2 * 3, "prefill steps x layers");
#endif
}

BOOST_AUTO_TEST_CASE(plans_past_the_capacities_are_rejected) {
  auto f = tiny_file("caps", model::tiny_config_a());
  cuda_executor gpu(f, gpu_opts(4, 16, true));  // 128 tokens, 8 sequences, 16 blocks
  auto seq = [](uint64_t id, int32_t n, std::vector<block_id> blocks) {
    scheduled_seq q;
    q.id = id;
    q.tokens.assign(static_cast<size_t>(n), 5);
    q.block_table = std::move(blocks);
    q.sample = true;
    return q;
  };
  step_plan too_many_tokens;
  for (uint64_t i = 0; i < 5; ++i) too_many_tokens.seqs.push_back(seq(i, 26, {0, 1, 2, 3, 4, 5, 6}));
  BOOST_CHECK_THROW(gpu.step(too_many_tokens), std::invalid_argument);
  step_plan too_many_seqs;
  for (uint64_t i = 0; i < 9; ++i) too_many_seqs.seqs.push_back(seq(i, 1, {static_cast<block_id>(i)}));
  BOOST_CHECK_THROW(gpu.step(too_many_seqs), std::invalid_argument);
  step_plan bad_block;
  bad_block.seqs.push_back(seq(1, 3, {16}));  // block 16 is the padding sink, never the scheduler's
  BOOST_CHECK_THROW(gpu.step(bad_block), std::invalid_argument);
  step_plan ok;
  ok.seqs.push_back(seq(1, 3, {15}));
  BOOST_TEST(gpu.step(ok).sampled.size() == 1u);  // still serving after the rejections
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
