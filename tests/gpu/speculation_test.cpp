// Speculative decoding on the CUDA executor (docs/gpu.md §3): in batch-invariant mode a row's
// logits are the same bits whatever else its step holds (decode rows of other sequences, prompt
// chunks, drafted rows; its own prompt chunked differently; graphs or eager steps), so verifying
// drafts changes no token: through the real scheduler, every job's tokens, logprobs, alternatives
// and finish reason are identical with n-gram drafting on and off (synchronous and pipelined
// steps), greedy and seeded, with top logprobs, logit_bias and penalties (drawn on the host,
// drafts counted) and structured outputs, alone and in a batch.
// In the emulator, whose cuBLASLt picks split-K by shape as a real one does, the same comparison
// without batch-invariant mode differs: the check can fail.
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "gpu/cuda_executor.hpp"
#include "gpu/gemm.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/cpu/sampler.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "spec_driver.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

constexpr int32_t kPerSeq = 32, kBlocks = 6 * kPerSeq;  // sequence i (1..5) owns blocks i*kPerSeq ..

model::gguf_file spec_file() {
  const std::string path = model::testing::temp_path("gpu_spec.gguf");
  model::write_tiny_llama(path, model::tiny_config_a());
  return model::gguf_file::open(path);
}

cuda_executor_options spec_opts(bool invariant, bool graphs, int32_t drafts) {
  cuda_executor_options o = gpu_opts(4, kBlocks, graphs);
  o.max_num_batched_tokens = 256;
  o.max_num_seqs = 8;
  o.batch_invariant = invariant;
  o.max_drafts = drafts;
  return o;
}

scheduled_seq seq_of(seq_id id, const std::vector<token_id>& tokens, int32_t computed, bool sample, int32_t drafts,
                     int32_t prompt_len) {
  scheduled_seq s;
  s.id = id;
  s.tokens = tokens;
  s.num_computed_tokens = computed;
  s.sample = sample;
  s.num_drafts = drafts;
  s.num_prompt_tokens = prompt_len;
  for (int32_t b = 0; b < kPerSeq; ++b) s.block_table.push_back(static_cast<block_id>(id) * kPerSeq + b);
  return s;
}

// One step; returns the logits of sequence `id`'s sampled rows, in row order.
std::vector<float> rows_of(cuda_executor& ex, const std::vector<scheduled_seq>& seqs, seq_id id) {
  step_plan plan;
  plan.seqs = seqs;
  const step_result r = ex.step(plan);
  const std::vector<float> all = ex.last_logits();
  const size_t V = static_cast<size_t>(ex.info().vocab_size);
  std::vector<float> mine;
  for (size_t k = 0; k < r.sampled.size(); ++k)
    if (r.sampled[k].id == id) mine.insert(mine.end(), all.begin() + std::ptrdiff_t(k * V), all.begin() + std::ptrdiff_t((k + 1) * V));
  return mine;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Sequence 1 (a 90-token prompt: two context splits) through its prompt, a decode and a
// verification of three drafts, in three kinds of company; its logits at each stage, concatenated.
struct scenario_logits {
  std::vector<float> prompt_end, decode, verify;
};

constexpr int32_t kPrompt = 90;

scenario_logits alone(cuda_executor& ex, const std::vector<token_id>& p) {
  scenario_logits o;
  o.prompt_end = rows_of(ex, {seq_of(1, p, 0, true, 0, kPrompt)}, 1);
  o.decode = rows_of(ex, {seq_of(1, {7}, kPrompt, true, 0, kPrompt)}, 1);
  o.verify = rows_of(ex, {seq_of(1, {9, 11, 13, 15}, kPrompt + 1, true, 3, kPrompt)}, 1);
  return o;
}

// The prompt in chunks of 25 beside other prompts and decodes; the decode beside a prompt chunk
// and another's drafts; the verification beside decodes, drafts and a prompt chunk.
scenario_logits in_company(cuda_executor& ex, const std::vector<token_id>& p, const std::vector<token_id>& q) {
  scenario_logits o;
  const std::vector<token_id> q_first(q.begin(), q.begin() + 30);
  for (int32_t at = 0; at < kPrompt; at += 25) {
    const int32_t n = std::min(25, kPrompt - at);
    std::vector<scheduled_seq> step{seq_of(1, std::vector<token_id>(p.begin() + at, p.begin() + at + n), at, at + n == kPrompt, 0, kPrompt)};
    if (at == 0) step.push_back(seq_of(2, q_first, 0, false, 0, 40));
    if (at == 25) step.insert(step.begin(), seq_of(2, std::vector<token_id>(q.begin() + 30, q.begin() + 40), 30, true, 0, 40));
    if (at >= 50) step.push_back(seq_of(2, {5}, 40 + (at - 50) / 25, true, 0, 40));
    const std::vector<float> r = rows_of(ex, step, 1);
    if (at + n == kPrompt) o.prompt_end = r;
  }
  const std::vector<token_id> r3 = prompt_of(12, 269, 3);
  o.decode = rows_of(ex, {seq_of(3, r3, 0, true, 0, 12), seq_of(2, {6, 8, 10}, 42, true, 2, 40), seq_of(1, {7}, kPrompt, true, 0, kPrompt)}, 1);
  o.verify = rows_of(ex, {seq_of(2, {12}, 45, true, 0, 40), seq_of(1, {9, 11, 13, 15}, kPrompt + 1, true, 3, kPrompt),
                          seq_of(3, {4, 6}, 12, true, 1, 12), seq_of(4, prompt_of(17, 269, 4), 0, false, 0, 30)}, 1);
  return o;
}

// The drafted rows one step each: the logits a verification must reproduce.
std::vector<float> drafts_one_by_one(cuda_executor& ex, const std::vector<token_id>& p) {
  (void)rows_of(ex, {seq_of(1, p, 0, true, 0, kPrompt)}, 1);
  (void)rows_of(ex, {seq_of(1, {7}, kPrompt, true, 0, kPrompt)}, 1);
  std::vector<float> all;
  const token_id t[] = {9, 11, 13, 15};
  for (int32_t i = 0; i < 4; ++i) {
    const std::vector<float> r = rows_of(ex, {seq_of(1, {t[i]}, kPrompt + 1 + i, true, 0, kPrompt)}, 1);
    all.insert(all.end(), r.begin(), r.end());
  }
  return all;
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_speculation, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(a_rows_logits_do_not_depend_on_the_rest_of_its_step) {
  auto f = spec_file();
  const std::vector<token_id> p = prompt_of(kPrompt, 269, 1), q = prompt_of(40, 269, 2);
  cuda_executor ref(f, spec_opts(true, true, 4));
  const scenario_logits a = alone(ref, p);
  BOOST_REQUIRE_EQUAL(a.verify.size(), 4u * 269u);
  for (bool graphs : {true, false}) {
    BOOST_TEST_CONTEXT((graphs ? "graphs" : "eager")) {
      cuda_executor ex(f, spec_opts(true, graphs, 4));
      const scenario_logits b = in_company(ex, p, q);
      BOOST_TEST(same_bits(a.prompt_end, b.prompt_end), "the prompt's last row, chunked and in company");
      BOOST_TEST(same_bits(a.decode, b.decode), "a decode row beside a prompt chunk and drafts");
      BOOST_TEST(same_bits(a.verify, b.verify), "drafted rows beside decodes, drafts and a prompt chunk");
      cuda_executor one(f, spec_opts(true, graphs, 4));
      BOOST_TEST(same_bits(a.verify, drafts_one_by_one(one, p)), "drafted rows against the same tokens one step each");
      cuda_executor split(f, spec_opts(true, graphs, 4));  // the prompt's last token alone: a one-row prompt tile
      (void)rows_of(split, {seq_of(1, std::vector<token_id>(p.begin(), p.end() - 1), 0, false, 0, kPrompt)}, 1);
      BOOST_TEST(same_bits(a.prompt_end, rows_of(split, {seq_of(1, {p.back()}, kPrompt - 1, true, 0, kPrompt)}, 1)),
                 "the prompt's last token as a chunk of its own");
    }
  }
#if defined(CONVEYOR_CUDA_EMU)
  // Without batch-invariant mode the products' split-K follows the step's shape: rows differ.
  cuda_executor plain_ref(f, spec_opts(false, true, 0)), plain(f, spec_opts(false, true, 0));
  std::vector<float> lone = rows_of(plain_ref, {seq_of(1, p, 0, true, 0, kPrompt)}, 1);
  lone = rows_of(plain_ref, {seq_of(1, {7}, kPrompt, true, 0, kPrompt)}, 1);
  (void)rows_of(plain, {seq_of(1, p, 0, true, 0, kPrompt)}, 1);
  std::vector<scheduled_seq> crowd{seq_of(1, {7}, kPrompt, true, 0, kPrompt)};
  for (seq_id s = 2; s <= 5; ++s) crowd.push_back(seq_of(s, prompt_of(8, 269, static_cast<int32_t>(s)), 0, true, 0, 8));
  BOOST_TEST(!same_bits(lone, rows_of(plain, crowd, 1)), "the emulator's cuBLASLt should make a shape-dependent plan visible");
#endif
}

BOOST_AUTO_TEST_CASE(speculation_changes_no_token_logprob_or_event) {
  auto f = spec_file();
  const int32_t V = 269;
  for (int32_t seqs : {1, 8}) {
    BOOST_TEST_CONTEXT("max_num_seqs " << seqs) {
      cuda_executor ex(f, spec_opts(true, true, 5));
      const std::vector<request> jobs = model::mixed_jobs(seqs == 1 ? 4 : 10, V, 12);
      const model::run_out off = model::run_jobs(ex, jobs, false, seqs, nullptr);
      const model::run_out on = model::run_jobs(ex, jobs, true, seqs, nullptr);
      const model::run_out piped = model::run_jobs(ex, jobs, true, seqs, nullptr, /*pipelined=*/true);
      BOOST_TEST(off.stats.num_spec_drafts == 0);
      BOOST_TEST(on.stats.num_spec_drafts > 0);
      BOOST_TEST(on.stats.num_spec_accepted_tokens > 0);
      BOOST_TEST(piped.stats.num_spec_accepted_tokens > 0, "pipelined: " << piped.stats.num_spec_drafts << " drafts, " << piped.stats.num_spec_accepted_tokens << " accepted; sync: " << on.stats.num_spec_drafts << ", " << on.stats.num_spec_accepted_tokens);
      for (const request& r : jobs) {
        BOOST_TEST_CONTEXT("job " << r.id) {
          BOOST_REQUIRE(off.jobs.count(r.id) == 1u);
          BOOST_TEST(!off.jobs.at(r.id).tokens.empty());
          BOOST_TEST((off.jobs.at(r.id) == on.jobs.at(r.id)), "tokens, logprobs or alternatives differ with speculation on");
          BOOST_TEST((off.jobs.at(r.id) == piped.jobs.at(r.id)), "the same with pipelined steps (k_previous_sample decodes)");
        }
      }
    }
  }
}

// A verification on the GPU against the CPU executor's: every drafted row's logits within the
// tier's bound, and each row's token the CPU sampler's draw from the GPU's logits at that row's
// own position (greedy and seeded).
BOOST_AUTO_TEST_CASE(verification_rows_match_the_cpu_executor) {
  auto f = spec_file();
  const std::vector<token_id> p = prompt_of(30, 269, 7);
  model::cpu_executor cpu(f, cpu_opts(4, kBlocks));
  cuda_executor gpu(f, spec_opts(true, false, 4));
  sampling_params seeded;
  seeded.temperature = 0.8f;
  seeded.top_p = 0.9f;
  seeded.top_k = 40;
  seeded.seed = 77;
  model::sampler_scratch scratch;
  for (const sampling_params& sp : {sampling_params{}, seeded}) {
    std::vector<scheduled_seq> prompt{seq_of(1, p, 0, true, 0, 30)}, verify{seq_of(1, {5, 9, 11, 13, 15}, 30, true, 4, 30)};
    prompt[0].sampling = verify[0].sampling = sp;
    step_plan a, b;
    a.seqs = prompt;
    b.seqs = verify;
    (void)cpu.step(a);
    (void)gpu.step(a);
    const step_result rc = cpu.step(b), rg = gpu.step(b);
    BOOST_REQUIRE_EQUAL(rg.sampled.size(), 5u);
    const std::vector<float> lg = gpu.last_logits(), lc = cpu.last_logits();
    for (size_t k = 0; k < 5; ++k) {
      const std::vector<float> g(lg.begin() + std::ptrdiff_t(k * 269), lg.begin() + std::ptrdiff_t((k + 1) * 269));
      const std::vector<float> c(lc.begin() + std::ptrdiff_t(k * 269), lc.begin() + std::ptrdiff_t((k + 1) * 269));
      BOOST_TEST(rel_error(g, c) < 3e-2, "row " << k << " (T " << sp.temperature << ")");
      BOOST_TEST(rg.sampled[k].token == model::sample_token(g, sp, 31 + static_cast<int64_t>(k), scratch).token);
    }
  }
}

// A preempted sequence's recompute (prompt and output in one chunk) computes its output rows as
// decode rows, as they were first computed: more of them than the attention partials hold (40
// here) take several launches, and the last row's logits are the bits its decode step had.
BOOST_AUTO_TEST_CASE(a_recompute_gives_the_output_rows_their_decode_bits) {
  auto f = spec_file();
  const std::vector<token_id> p = prompt_of(10, 269, 5), g = prompt_of(50, 269, 6);
  cuda_executor decoded(f, spec_opts(true, true, 4)), recomputed(f, spec_opts(true, true, 4));
  (void)rows_of(decoded, {seq_of(1, p, 0, true, 0, 10)}, 1);
  std::vector<float> last;
  for (int32_t i = 0; i < 50; ++i) last = rows_of(decoded, {seq_of(1, {g[static_cast<size_t>(i)]}, 10 + i, true, 0, 10)}, 1);
  std::vector<token_id> all = p;
  all.insert(all.end(), g.begin(), g.end());
  BOOST_TEST(same_bits(last, rows_of(recomputed, {seq_of(1, all, 0, true, 0, 10)}, 1)));
}

// Structured outputs: a drafted row's mask is its grammar's after the drafts before it (accepted,
// masks filled, rolled back: engine/draft_rows.hpp), drawn on the host from the GPU's logits.
BOOST_AUTO_TEST_CASE(structured_outputs_change_nothing_with_drafts) {
  auto f = spec_file();
  const model::tokenizer tok = model::tokenizer::from_gguf(f);
  cuda_executor ex(f, spec_opts(true, false, 5));
  const model::grammar_compiler gc(tok, ex.info().vocab_size);
  int64_t constrained_accepted = 0;
  for (int32_t seqs : {1, 6}) {
    const std::vector<request> jobs = model::constrained_jobs(gc, tok, 6, 12);
    std::vector<request> chosen = seqs == 1 ? std::vector<request>{jobs[0], jobs[4]} : jobs;
    const model::run_out off = model::run_jobs(ex, chosen, false, seqs, nullptr);
    std::vector<request> again = model::constrained_jobs(gc, tok, 6, 12);
    if (seqs == 1) again = {again[0], again[4]};
    const model::run_out on = model::run_jobs(ex, again, true, seqs, nullptr);
    if (seqs == 1) constrained_accepted = on.stats.num_spec_accepted_tokens;
    for (const request& r : chosen) {
      BOOST_TEST_CONTEXT("max_num_seqs " << seqs << ", job " << r.id << (r.constraint ? " (grammar)" : "")) {
        BOOST_TEST(!off.jobs.at(r.id).tokens.empty());
        BOOST_TEST((off.jobs.at(r.id) == on.jobs.at(r.id)), "tokens, logprobs or alternatives differ with speculation on");
      }
    }
  }
  BOOST_TEST(constrained_accepted > 0, "drafts of constrained jobs stood");
}

BOOST_AUTO_TEST_CASE(drafts_past_the_executors_bounds_are_refused) {
  auto f = spec_file();
  const std::vector<token_id> p = prompt_of(10, 269, 1);
  cuda_executor plain(f, spec_opts(false, false, 0)), two(f, spec_opts(true, false, 2));
  BOOST_TEST(!plain.info().verifies_drafts);
  BOOST_TEST(two.info().verifies_drafts);
  step_plan plan;
  plan.seqs = {seq_of(1, {3, 4, 5, 6}, 10, true, 3, 10)};
  BOOST_CHECK_THROW(plain.step(plan), std::invalid_argument);
  BOOST_CHECK_THROW(two.step(plan), std::invalid_argument);  // 3 drafts, max_drafts 2
  plan.seqs = {seq_of(1, p, 0, true, 0, 10)};
  BOOST_CHECK_NO_THROW(two.step(plan));
  plan.seqs = {seq_of(1, {3, 4, 5}, 10, true, 2, 10)};
  BOOST_TEST(two.step(plan).sampled.size() == 3u);
}

// gemm_runner's batch-invariant mode: one plan per class whatever m (bounded), a product naming
// no class refused, and the mode set only before the first product.
BOOST_AUTO_TEST_CASE(invariant_products_keep_one_plan_per_class) {
  const int32_t n = 64, k = 96;
  dev_array<bf16> a(64 * k), w(n * k);
  dev_array<float> c(64 * n);
  a.upload(std::vector<bf16>(64 * k, __float2bfloat16(0.5f)));
  w.upload(std::vector<bf16>(n * k, __float2bfloat16(0.25f)));
  gemm_runner g;
  g.set_invariant(16, 64, 16);
  for (int32_t m : {1, 3, 17, 64}) {
    g.run(a.get(), w.get(), c.get(), true, m, n, k, 0.0f, nullptr, row_class::decode);
    g.run(a.get() + k, w.get(), c.get(), true, m - 1, n, k, 0.0f, nullptr, row_class::prompt);  // rows past the start
  }
  BOOST_TEST(g.plan_count() == 2u);
  BOOST_CHECK_THROW(g.run(a.get(), w.get(), c.get(), true, 1, n, k, 0.0f, nullptr), std::logic_error);
  BOOST_CHECK_THROW(g.set_invariant(8, 8, 8), std::logic_error);
  const std::vector<float> out = c.download();
  BOOST_TEST(out[0] == 0.5f * 0.25f * k);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
