// Paged attention over a step mixing a prompt chunk, a full prompt and decodes (short and long
// contexts, shuffled blocks), with and without the context split, against a double-precision
// reference; device sampling against model::sample_token (same token, same coin) for greedy,
// temperature, top-k, top-p, min-p and their mix, and for exact ties (lowest id first, -0 = +0).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <span>

#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"
#include "model/cpu/sampler.hpp"

namespace conveyor::gpu::testing {
namespace {

struct attn_case {
  kv_shape s;
  std::vector<int32_t> computed, lens;
};

void check_attention(const attn_case& c, std::mt19937& rng) {
  const kv_shape& s = c.s;
  const int32_t G = s.n_head / s.n_kv;
  step_plan plan;
  int32_t total_blocks = 0;
  for (size_t q = 0; q < c.lens.size(); ++q) total_blocks += (c.computed[q] + c.lens[q] + s.block_size - 1) / s.block_size;
  const int32_t num_blocks = total_blocks + 5;
  std::vector<int32_t> perm(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  int32_t next = 0;
  for (size_t q = 0; q < c.lens.size(); ++q) {
    scheduled_seq sq;
    sq.id = q;
    sq.num_computed_tokens = c.computed[q];
    sq.tokens.assign(size_t(c.lens[q]), 1);
    for (int32_t b = 0; b < (c.computed[q] + c.lens[q] + s.block_size - 1) / s.block_size; ++b) sq.block_table.push_back(perm[next++]);
    plan.seqs.push_back(sq);
  }
  const size_t cache_elems = size_t(num_blocks) * s.n_kv * s.block_size * s.head_dim;
  std::vector<float> k_f, v_f, q_f;
  dev_array<bf16_bits> kc(random_bf16(rng, cache_elems, 1.0f, &k_f)), vc(random_bf16(rng, cache_elems, 1.0f, &v_f));
  const float scale = 1.0f / std::sqrt(float(s.head_dim));
  for (int32_t tile_tokens : {1, 4, 16}) {
    step_meta_buffer meta(step_caps{256, 16, 1024});
    const step_shape sh = meta.fill(plan, 0, tile_tokens, G, s.block_size, num_blocks);
    meta.upload(sh, nullptr);
    const int32_t T = sh.tokens;
    dev_array<bf16_bits> q(random_bf16(rng, size_t(T) * s.n_head * s.head_dim, 1.0f, &q_f));
    // Reference in double.
    std::vector<float> ref(size_t(T) * s.n_head * s.head_dim);
    int32_t t = 0;
    for (const auto& sq : plan.seqs)
      for (size_t i = 0; i < sq.tokens.size(); ++i, ++t) {
        const int32_t pos = sq.num_computed_tokens + int32_t(i);
        for (int32_t h = 0; h < s.n_head; ++h) {
          const int32_t g = h / G;
          const float* qv = &q_f[(size_t(t) * s.n_head + h) * s.head_dim];
          std::vector<double> sc(size_t(pos) + 1);
          double mx = -INFINITY;
          for (int32_t j = 0; j <= pos; ++j) {
            const size_t off = ((size_t(sq.block_table[size_t(j / s.block_size)]) * s.n_kv + g) * s.block_size + j % s.block_size) * s.head_dim;
            double dot = 0.0;
            for (int32_t d = 0; d < s.head_dim; ++d) dot += double(qv[d]) * k_f[off + d];
            sc[size_t(j)] = dot * scale;
            mx = std::max(mx, sc[size_t(j)]);
          }
          double sum = 0.0;
          for (auto& x : sc) sum += (x = std::exp(x - mx));
          for (int32_t d = 0; d < s.head_dim; ++d) {
            double acc = 0.0;
            for (int32_t j = 0; j <= pos; ++j) {
              const size_t off = ((size_t(sq.block_table[size_t(j / s.block_size)]) * s.n_kv + g) * s.block_size + j % s.block_size) * s.head_dim;
              acc += sc[size_t(j)] / sum * v_f[off + d];
            }
            ref[(size_t(t) * s.n_head + h) * s.head_dim + d] = float(acc);
          }
        }
      }
    for (int32_t split_len : {0, 32, 256}) {
      attn_split sp;
      dev_array<float> part_o(size_t(T) * s.n_head * 64 * s.head_dim), part_ml(size_t(T) * s.n_head * 64 * 2);
      if (split_len > 0) {
        sp.split_len = split_len;
        sp.n_splits = (sh.max_ctx + split_len - 1) / split_len;
        sp.part_o = part_o.get();
        sp.part_ml = part_ml.get();
        part_o.poison();
        part_ml.poison();
      }
      dev_array<bf16_bits> out(ref.size());
      out.poison();
      launch_paged_attention(meta.device(), as_bf16(q), as_bf16(kc), as_bf16(vc), as_bf16(out), T, sh.tiles, sh.max_tile_rows, s,
                             scale, sp, nullptr);
      BOOST_TEST(rel_error(to_float(out.download()), ref) < bf16_bound,
                 "head_dim " << s.head_dim << " tile_tokens " << tile_tokens << " split_len " << split_len);
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_attention_sampling, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(paged_attention_mixed_step) {
  std::mt19937 rng(6);
  // A prompt chunk after 20 cached tokens, a long decode, a short decode, a whole prompt.
  check_attention({{8, 2, 64, 16}, {20, 700, 5, 0}, {37, 1, 1, 9}}, rng);
  check_attention({{32, 8, 128, 16}, {1500, 3, 0}, {1, 1, 40}}, rng);
  check_attention({{3, 1, 32, 4}, {0, 10}, {23, 1}}, rng);  // SmolLM2-like odd group, tiny blocks
}

BOOST_AUTO_TEST_CASE(sampling_matches_cpu_sampler) {
  std::mt19937 rng(7);
  struct row_case {
    int32_t vocab;
    sampling_params p;
  };
  auto sp = [](float t, int32_t k, float top_p, float min_p, uint64_t seed) {
    sampling_params p;
    p.temperature = t;
    p.top_k = k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    return p;
  };
  const std::vector<row_case> cases{
      {1000, sp(0.0f, 0, 1.0f, 0.0f, 1)},    {1000, sp(0.8f, 0, 1.0f, 0.0f, 2)},   {1000, sp(1.0f, 20, 1.0f, 0.0f, 3)},
      {1000, sp(1.0f, 0, 0.9f, 0.0f, 4)},    {1000, sp(1.0f, 0, 1.0f, 0.1f, 5)},   {1000, sp(0.7f, 50, 0.95f, 0.05f, 6)},
      {1000, sp(1.3f, 1, 1.0f, 0.0f, 7)},    {49152, sp(1.0f, 0, 0.95f, 0.0f, 8)}, {128256, sp(0.9f, 40, 0.9f, 0.02f, 9)},
      {128256, sp(0.0f, 0, 1.0f, 0.0f, 10)}, {1000, sp(1.0f, 0, 0.5f, 0.0f, 11)}};
  model::sampler_scratch scratch;
  int32_t rows_checked = 0;
  for (const row_case& c : cases)
    for (int64_t position : {1, 2, 3, 17, 100, 4095}) {
      auto logits = random_floats(rng, size_t(c.vocab), 3.0f);
      if (c.p.temperature == 0.0f) {  // a tie at the top: the lowest id wins
        const float mx = *std::max_element(logits.begin(), logits.end()) + 1.0f;
        logits[17] = mx;
        logits[5] = mx;
      }
      const model::sample_result want = model::sample_token(logits, c.p, position, scratch);
      sample_param p{c.p.temperature, c.p.top_p, c.p.min_p, c.p.top_k, c.p.seed, position};
      dev_array<float> dl(logits);
      dev_array<sample_param> dp(std::vector<sample_param>{p});
      dev_array<int32_t> ids(1);
      dev_array<float> lp(1);
      for (int run = 0; run < 2; ++run) {  // the same seed gives the same token on every run
        ids.poison();
        lp.poison();
        launch_sample(dl.get(), 1, c.vocab, dp.get(), ids.get(), lp.get(), nullptr);
        BOOST_TEST_CONTEXT("vocab " << c.vocab << " T " << c.p.temperature << " top_k " << c.p.top_k << " top_p " << c.p.top_p
                                    << " min_p " << c.p.min_p << " position " << position << " run " << run) {
          BOOST_TEST(ids.download()[0] == want.token);
          BOOST_TEST(std::abs(lp.download()[0] - want.logprob) < 1e-3f);
        }
      }
      ++rows_checked;
    }
  BOOST_TEST_MESSAGE(rows_checked << " sampled rows equal model::sample_token's");
}

// Exact ties, as a quantized LM head produces them: the lowest id wins, wherever the tied ids sit
// in the kernel (one thread's strided elements, two lanes, two warps), and -0 ties +0.
BOOST_AUTO_TEST_CASE(sampling_ties_go_to_the_lowest_id) {
  std::mt19937 rng(9);
  model::sampler_scratch scratch;
  // Greedy, several rows in one launch (512 threads per row: ids i and i + 512 share a thread).
  const int32_t V = 2000;
  const std::vector<std::vector<int32_t>> ties{{1030, 518}, {700, 100}, {45, 37}, {1999, 1500, 3}, {1536, 1024, 512}};
  std::vector<float> logits;
  std::vector<sample_param> params;
  for (const auto& t : ties) {
    auto row = random_floats(rng, size_t(V), 3.0f);
    const float mx = *std::max_element(row.begin(), row.end()) + 0.5f;
    for (int32_t id : t) row[size_t(id)] = mx;
    logits.insert(logits.end(), row.begin(), row.end());
    params.push_back(sample_param{});
  }
  const int32_t n = static_cast<int32_t>(ties.size());
  dev_array<float> dl(logits);
  dev_array<sample_param> dp(params);
  dev_array<int32_t> ids(static_cast<size_t>(n));
  dev_array<float> lp(static_cast<size_t>(n));
  ids.poison();
  launch_sample(dl.get(), n, V, dp.get(), ids.get(), lp.get(), nullptr);
  const auto got = ids.download();
  sampling_params greedy;
  greedy.temperature = 0.0f;
  for (int32_t r = 0; r < n; ++r) {
    const std::span<const float> row(logits.data() + size_t(r) * V, size_t(V));
    BOOST_TEST(got[size_t(r)] == model::sample_token(row, greedy, 1, scratch).token, "greedy row " << r);
  }
  // Temperature sampling over logits with large tied groups, half of the zeros negative.
  const int32_t V2 = 1000;
  auto sp = [](float t, int32_t k, float min_p) {
    sampling_params p;
    p.temperature = t;
    p.top_k = k;
    p.min_p = min_p;
    p.seed = 77;
    return p;
  };
  for (const sampling_params& p : {sp(1.0f, 0, 0.0f), sp(1.0f, 7, 0.0f), sp(0.5f, 0, 0.3f), sp(2.0f, 40, 0.0f), sp(0.0f, 0, 0.0f)})
    for (int64_t position : {1, 2, 3, 4, 5, 6, 7, 8}) {
      std::vector<float> row(static_cast<size_t>(V2));
      for (auto& x : row) {
        const uint32_t u = rng() % 20;
        x = u < 3 ? 0.0f : u < 6 ? -0.0f : u < 12 ? -0.75f : -4.0f;
      }
      const model::sample_result want = model::sample_token(row, p, position, scratch);
      const sample_param q{p.temperature, p.top_p, p.min_p, p.top_k, p.seed, position};
      dev_array<float> d(row);
      dev_array<sample_param> dq(std::vector<sample_param>{q});
      dev_array<int32_t> id(1);
      dev_array<float> l(1);
      id.poison();
      l.poison();
      launch_sample(d.get(), 1, V2, dq.get(), id.get(), l.get(), nullptr);
      BOOST_TEST_CONTEXT("T " << p.temperature << " top_k " << p.top_k << " min_p " << p.min_p << " position " << position) {
        BOOST_TEST(id.download()[0] == want.token);
        BOOST_TEST(std::abs(l.download()[0] - want.logprob) < 1e-3f);
      }
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
