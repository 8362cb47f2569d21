// The step-metadata buffer (gpu/step_meta.hpp) at odd and prime token capacities, as
// max_num_batched_tokens may be: every section starts 16-byte aligned (the sampling parameters
// hold 8-byte fields, and a section a kernel reads with a vector load must be aligned on a GPU,
// where a misaligned load faults), no two sections overlap, and each holds what fill() wrote
// after the upload; the sampling kernel reads its parameters from the buffer itself. Then the
// executor end to end at such a capacity against the CPU executor.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>

#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"
#include "lockstep.hpp"
#include "model/formats/gguf.hpp"
#include "model_files.hpp"
#include "tiny_model.hpp"

namespace conveyor::gpu::testing {
namespace {

template <class T>
std::vector<T> read_section(const T* dev, size_t n) {
  std::vector<T> v(n);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (n > 0) CUDA_CHECK(cudaMemcpy(v.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// Sequences 0..seqs-1 sharing `tokens` prompt tokens (the first ones one longer), each sampled
// greedily or with its own seed, over consecutive blocks of 4 positions.
step_plan full_plan(int32_t tokens, int32_t seqs, int32_t block_size) {
  step_plan plan;
  int32_t next_block = 0;
  for (int32_t i = 0; i < seqs; ++i) {
    scheduled_seq sq;
    sq.id = i;
    sq.num_computed_tokens = 3 * i;
    const int32_t n = tokens / seqs + (i < tokens % seqs ? 1 : 0);
    for (int32_t t = 0; t < n; ++t) sq.tokens.push_back(100 * i + t);
    for (int32_t b = 0; b < (sq.num_computed_tokens + n + block_size - 1) / block_size; ++b) sq.block_table.push_back(next_block++);
    sq.sample = true;
    sq.sampling.temperature = i % 2 ? 0.7f : 0.0f;
    sq.sampling.seed = 1000u + uint64_t(i);
    plan.seqs.push_back(sq);
  }
  return plan;
}

void check_capacity(int32_t tokens, int32_t seqs) {
  const int32_t block_size = 4;
  const step_plan plan = full_plan(tokens, seqs, block_size);
  int64_t entries = 0;
  for (const auto& sq : plan.seqs) entries += int64_t(sq.block_table.size());
  step_meta_buffer meta(step_caps{tokens, seqs, entries});
  const step_meta& m = meta.device();
  struct section {
    const char* name;
    const void* p;
    size_t bytes;
  };
  const size_t t4 = sizeof(int32_t) * size_t(tokens), s4 = sizeof(int32_t) * size_t(seqs);
  std::vector<section> sections{{"tokens", m.tokens, t4},
                                {"positions", m.positions, t4},
                                {"token_seq", m.token_seq, t4},
                                {"tile_first", m.tile_first, t4},
                                {"tile_count", m.tile_count, t4},
                                {"sample_rows", m.sample_rows, s4},
                                {"seq_block_off", m.seq_block_off, s4 + 2 * sizeof(int32_t)},
                                {"sampling", m.sampling, sizeof(sample_param) * size_t(seqs)},
                                {"split_len", m.split_len, sizeof(int32_t)},
                                {"blocks", m.blocks, sizeof(int32_t) * size_t(entries)}};
  for (const section& s : sections) BOOST_TEST(reinterpret_cast<uintptr_t>(s.p) % 16 == 0, s.name << " is not 16-byte aligned");
  std::sort(sections.begin(), sections.end(), [](const section& a, const section& b) { return a.p < b.p; });
  for (size_t i = 0; i + 1 < sections.size(); ++i)
    BOOST_TEST(static_cast<const char*>(sections[i].p) + sections[i].bytes <= sections[i + 1].p,
               sections[i].name << " runs into " << sections[i + 1].name);

  const step_shape sh = meta.fill(plan, 0, 4, 2, block_size, int32_t(entries));
  meta.set_split_len(96);
  meta.upload(sh, nullptr);
  BOOST_TEST(sh.tokens == tokens);
  const auto tok = read_section(m.tokens, size_t(tokens)), pos = read_section(m.positions, size_t(tokens));
  const auto tseq = read_section(m.token_seq, size_t(tokens)), rows = read_section(m.sample_rows, size_t(seqs));
  const auto boff = read_section(m.seq_block_off, size_t(seqs) + 1), blocks = read_section(m.blocks, size_t(entries));
  const auto tfirst = read_section(m.tile_first, size_t(sh.tiles)), tcount = read_section(m.tile_count, size_t(sh.tiles));
  const auto params = read_section(m.sampling, size_t(seqs));
  BOOST_TEST(read_section(m.split_len, 1)[0] == 96);
  int32_t row = 0, nb = 0, covered = 0;
  for (int32_t i = 0; i < seqs; ++i) {
    const scheduled_seq& sq = plan.seqs[size_t(i)];
    BOOST_TEST(boff[size_t(i)] == nb);
    for (block_id b : sq.block_table) BOOST_TEST(blocks[size_t(nb++)] == b);
    for (size_t t = 0; t < sq.tokens.size(); ++t, ++row) {
      BOOST_TEST(tok[size_t(row)] == sq.tokens[t]);
      BOOST_TEST(pos[size_t(row)] == sq.num_computed_tokens + int32_t(t));
      BOOST_TEST(tseq[size_t(row)] == i);
    }
    BOOST_TEST(rows[size_t(i)] == row - 1);
    BOOST_TEST(params[size_t(i)].temperature == sq.sampling.temperature);
    BOOST_TEST(params[size_t(i)].seed == sq.sampling.seed);
    BOOST_TEST(params[size_t(i)].position == sq.num_computed_tokens + int64_t(sq.tokens.size()));
  }
  BOOST_TEST(boff[size_t(seqs)] == nb);
  for (int32_t k = 0; k < sh.tiles; ++k) {
    BOOST_TEST(tfirst[size_t(k)] == covered);
    covered += tcount[size_t(k)];
  }
  BOOST_TEST(covered == tokens);

  // The sampling kernel on the buffer's own parameters: one peaked row per sequence.
  const int32_t V = 96;
  std::vector<float> logits(size_t(seqs) * V, -8.0f);
  for (int32_t i = 0; i < seqs; ++i) logits[size_t(i) * V + size_t((17 * i + 5) % V)] = 30.0f;
  dev_array<float> dl(logits), lp(static_cast<size_t>(seqs));
  dev_array<int32_t> ids(static_cast<size_t>(seqs));
  ids.poison();
  launch_sample(dl.get(), seqs, V, m.sampling, ids.get(), lp.get(), nullptr);
  const auto got = ids.download();
  for (int32_t i = 0; i < seqs; ++i) BOOST_TEST(got[size_t(i)] == (17 * i + 5) % V, "sampled row " << i);
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_step_meta, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(sections_stay_aligned_at_odd_and_prime_capacities) {
  for (int32_t tokens : {1, 7, 13, 31, 127})
    for (int32_t seqs : {1, 3, 5, 7})
      if (seqs <= tokens) BOOST_TEST_CONTEXT("tokens " << tokens << " seqs " << seqs) { check_capacity(tokens, seqs); }
}

// The batch-invariant layout (decode rows first): a prompt chunk, a drafted sequence (newest token
// and 2 drafts), a recompute (3 prompt rows, then 2 output rows) and a decode, in that plan order.
// Decode rows come first in plan order, each its own tile; then the prompt rows in tiles; samples
// stay in plan order, a drafted sequence's three rows with positions end - 2, end - 1, end; row_of()
// maps every plan row to its step row.
BOOST_AUTO_TEST_CASE(decode_rows_first_layout) {
  step_plan plan;
  const auto add = [&](seq_id id, std::vector<token_id> t, int32_t computed, int32_t prompt_len, bool sample, int32_t drafts) {
    scheduled_seq q;
    q.id = id;
    q.tokens = std::move(t);
    q.num_computed_tokens = computed;
    q.num_prompt_tokens = prompt_len;
    q.sample = sample;
    q.num_drafts = drafts;
    for (int32_t b = 0; b < 4; ++b) q.block_table.push_back(4 * static_cast<int32_t>(id) + b);
    plan.seqs.push_back(q);
  };
  add(0, {10, 11, 12, 13, 14, 15}, 0, 9, false, 0);  // prompt rows 0..5 of 9
  add(1, {20, 21, 22}, 7, 5, true, 2);               // decode: positions 7, 8, 9
  add(2, {30, 31, 32, 33, 34}, 0, 3, true, 0);       // recompute: prompt 0..2, output 3..4
  add(3, {40}, 4, 4, true, 0);                       // decode at position 4
  step_meta_buffer meta(step_caps{16, 4, 16, 8}, /*decode_rows_first=*/true);
  const step_shape sh = meta.fill(plan, 0, 4, 1, 4, 16);
  meta.upload(sh, nullptr);
  const step_meta& m = meta.device();
  BOOST_TEST(sh.tokens == 15);
  BOOST_TEST(sh.decode_rows == 6);
  BOOST_TEST(sh.samples == 5);
  const auto tok = read_section(m.tokens, 15), pos = read_section(m.positions, 15);
  const std::vector<int32_t> want_tok{20, 21, 22, 33, 34, 40, 10, 11, 12, 13, 14, 15, 30, 31, 32};
  const std::vector<int32_t> want_pos{7, 8, 9, 3, 4, 4, 0, 1, 2, 3, 4, 5, 0, 1, 2};
  BOOST_TEST(tok == want_tok, boost::test_tools::per_element());
  BOOST_TEST(pos == want_pos, boost::test_tools::per_element());
  const auto tfirst = read_section(m.tile_first, size_t(sh.tiles)), tcount = read_section(m.tile_count, size_t(sh.tiles));
  BOOST_REQUIRE(sh.tiles == 6 + 2 + 1);  // six one-row decode tiles; the prompt chunk 4 + 2; the recompute's 3
  for (int32_t k = 0; k < 6; ++k) BOOST_TEST((tfirst[size_t(k)] == k && tcount[size_t(k)] == 1));
  BOOST_TEST((tfirst[6] == 6 && tcount[6] == 4 && tfirst[7] == 10 && tcount[7] == 2 && tfirst[8] == 12 && tcount[8] == 3));
  const auto rows = read_section(m.sample_rows, 5);
  const auto params = read_section(m.sampling, 5);
  const std::vector<int32_t> want_rows{0, 1, 2, 4, 5};  // seq 1's three rows, seq 2's last, seq 3's
  const std::vector<int64_t> want_positions{8, 9, 10, 5, 5};
  BOOST_TEST(rows == want_rows, boost::test_tools::per_element());
  for (size_t k = 0; k < 5; ++k) BOOST_TEST(params[k].position == want_positions[k], "sample " << k);
  const std::vector<int32_t> want_map{6, 7, 8, 9, 10, 11, 0, 1, 2, 12, 13, 14, 3, 4, 5};
  for (int32_t r = 0; r < 15; ++r) BOOST_TEST(meta.row_of(r) == want_map[size_t(r)], "plan row " << r);
}

// max_num_batched_tokens 13 and max_num_seqs 5: two chunked prompts and a third joining later.
BOOST_AUTO_TEST_CASE(executor_at_a_prime_token_capacity) {
  const std::string path = model::testing::temp_path("prime_caps.gguf");
  model::write_tiny_llama(path, model::tiny_config_a());
  auto f = model::gguf_file::open(path);
  const int32_t V = 269, per_seq = 8;
  model::cpu_executor cpu(f, cpu_opts(8, 3 * per_seq));
  cuda_executor_options o = gpu_opts(8, 3 * per_seq, true);
  o.max_num_batched_tokens = 13;
  o.max_num_seqs = 5;
  cuda_executor gpu(f, o);
  std::vector<lock_seq> seqs(3);
  seqs[0].prompt = prompt_of(17, V, 1);
  seqs[0].chunk = 5;
  seqs[1].prompt = prompt_of(11, V, 2);
  seqs[1].chunk = 6;
  seqs[2].prompt = prompt_of(2, V, 3);
  seqs[2].start_step = 3;
  seqs[1].sampling.temperature = 0.8f;
  seqs[1].sampling.seed = 5;
  int32_t rows = 0;
  const double err = lockstep(cpu, gpu, seqs, per_seq, rows);
  BOOST_TEST(rows > 0);
  BOOST_TEST(err < 3e-2, "relative logit error " << err);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
