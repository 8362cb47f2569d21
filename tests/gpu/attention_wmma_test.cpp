// The tensor-core prefill attention (gpu/attention_wmma.cu) on steps mixing prompt chunks of
// ragged lengths (1, 2, 15, 16, 17, 40 tokens; chunks starting mid-context), decodes, GQA groups
// 1/2/4, head_dim 32/64/128 and block sizes 1/16/32, as launch_attention runs them (prompt tiles
// on tensor cores, decode tiles on the CUDA-core kernel), against a double-precision reference
// and against the CUDA-core kernel alone. Queries are scaled so attention is peaked (the online
// softmax's rescale of O matters) and contexts span several 32-key tiles.
//
// Tolerance: the reference is exact on the bf16 inputs. The wmma kernel rounds P to bf16 before
// P.V (FlashAttention does the same) and normalizes by the sum of the rounded weights, so its
// output is an exact average with weights off by <= 2^-9 relative each: ~1e-3 relative rms, as
// much again from rounding the output to bf16. The bound is the tier's bf16 bound, 1e-2 (about
// 5x the expected error); the mutants of docs/gpu-emulator.md land at 0.1 and above.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"

namespace conveyor::gpu::testing {
namespace {

struct wmma_case {
  kv_shape s;
  std::vector<int32_t> computed, lens;
};

std::vector<float> reference(const step_plan& plan, const kv_shape& s, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v, float scale) {
  const int32_t G = s.n_head / s.n_kv, hd = s.head_dim;
  std::vector<float> ref;
  int32_t t = 0;
  for (const auto& sq : plan.seqs)
    for (size_t i = 0; i < sq.tokens.size(); ++i, ++t) {
      const int32_t pos = sq.num_computed_tokens + int32_t(i);
      for (int32_t h = 0; h < s.n_head; ++h) {
        auto off = [&](int32_t j) {
          return ((size_t(sq.block_table[size_t(j / s.block_size)]) * s.n_kv + h / G) * s.block_size + j % s.block_size) * hd;
        };
        const float* qv = &q[(size_t(t) * s.n_head + h) * hd];
        std::vector<double> w(size_t(pos) + 1);
        double mx = -INFINITY, sum = 0.0;
        for (int32_t j = 0; j <= pos; ++j) {
          double dot = 0.0;
          for (int32_t d = 0; d < hd; ++d) dot += double(qv[d]) * k[off(j) + d];
          mx = std::max(mx, w[size_t(j)] = dot * scale);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int32_t d = 0; d < hd; ++d) {
          double acc = 0.0;
          for (int32_t j = 0; j <= pos; ++j) acc += w[size_t(j)] / sum * v[off(j) + d];
          ref.push_back(float(acc));
        }
      }
    }
  return ref;
}

void check_wmma(const wmma_case& c, std::mt19937& rng) {
  const kv_shape& s = c.s;
  const int32_t G = s.n_head / s.n_kv;
  step_plan plan;
  int32_t total_blocks = 0;
  for (size_t i = 0; i < c.lens.size(); ++i) total_blocks += (c.computed[i] + c.lens[i] + s.block_size - 1) / s.block_size;
  const int32_t num_blocks = total_blocks + 3;
  std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
  for (int32_t i = 0; i < num_blocks; ++i) perm[size_t(i)] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  int32_t next = 0;
  for (size_t i = 0; i < c.lens.size(); ++i) {
    scheduled_seq sq;
    sq.id = int64_t(i);
    sq.num_computed_tokens = c.computed[i];
    sq.tokens.assign(size_t(c.lens[i]), 1);
    for (int32_t b = 0; b < (c.computed[i] + c.lens[i] + s.block_size - 1) / s.block_size; ++b) sq.block_table.push_back(perm[size_t(next++)]);
    plan.seqs.push_back(sq);
  }
  const size_t cache_elems = size_t(num_blocks) * s.n_kv * s.block_size * s.head_dim;
  std::vector<float> k_f, v_f, q_f;
  dev_array<bf16_bits> kc(random_bf16(rng, cache_elems, 1.0f, &k_f)), vc(random_bf16(rng, cache_elems, 1.0f, &v_f));
  const float scale = 1.0f / std::sqrt(float(s.head_dim));
  // The executor's tile size (cuda_executor.cpp), and 5 tokens: tiles of R = 5 G ragged rows.
  for (int32_t tile_tokens : {std::max(1, std::min(64 / G, 8192 / (s.head_dim * G))), 5}) {
    step_meta_buffer meta(step_caps{256, 16, 1024});
    const step_shape sh = meta.fill(plan, 0, tile_tokens, G, s.block_size, num_blocks);
    meta.upload(sh, nullptr);
    const int32_t T = sh.tokens;
    dev_array<bf16_bits> q(random_bf16(rng, size_t(T) * s.n_head * s.head_dim, 3.0f, &q_f));
    const auto ref = reference(plan, s, q_f, k_f, v_f, scale);
    BOOST_TEST_CONTEXT("head_dim " << s.head_dim << " G " << G << " block " << s.block_size << " tile_tokens " << tile_tokens) {
      dev_array<bf16_bits> out(ref.size()), core(ref.size());
      out.poison();
      core.poison();
      BOOST_REQUIRE(launch_paged_attention_wmma(meta.device(), as_bf16(q), as_bf16(kc), as_bf16(vc), as_bf16(out), sh.tiles,
                                                sh.max_tile_rows, s, scale, nullptr));
      launch_paged_attention(meta.device(), as_bf16(q), as_bf16(kc), as_bf16(vc), as_bf16(out), T, sh.tiles, G, s, scale,
                             attn_split{}, nullptr, 1);  // the decode tiles, as launch_attention does
      launch_paged_attention(meta.device(), as_bf16(q), as_bf16(kc), as_bf16(vc), as_bf16(core), T, sh.tiles, sh.max_tile_rows, s,
                             scale, attn_split{}, nullptr);
      const auto got = to_float(out.download()), cuda_core = to_float(core.download());
      const double err = rel_error(got, ref), core_err = rel_error(cuda_core, ref);
      BOOST_TEST_MESSAGE("wmma attention: relative error " << err << " (CUDA-core kernel " << core_err << ")");
      BOOST_TEST(err < bf16_bound);
      BOOST_TEST(got != cuda_core);  // the prompt rows came from the other kernel (P in bf16)
      BOOST_TEST(rel_error(got, cuda_core) < bf16_bound);
      // Every token row on its own (a wrong row hides in a whole-step norm).
      const size_t row = size_t(s.n_head) * s.head_dim;
      for (int32_t t = 0; t < T; ++t) {
        const std::vector<float> g(got.begin() + t * row, got.begin() + (t + 1) * row), r(ref.begin() + t * row, ref.begin() + (t + 1) * row);
        BOOST_TEST(rel_error(g, r) < 2 * bf16_bound, "token row " << t);
      }
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_attention_wmma, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(wmma_prefill_attention_ragged_chunks) {
  std::mt19937 rng(12);
  // GQA 1, head_dim 64, blocks of 16: prompts of 1, 15, 16, 17, 40 tokens (three mid-context), a decode.
  check_wmma({{2, 2, 64, 16}, {0, 0, 5, 20, 33, 49}, {1, 15, 16, 17, 40, 1}}, rng);
  // GQA 4, head_dim 128, blocks of 32: a chunk after 50 cached tokens, a whole prompt, decodes.
  check_wmma({{8, 2, 128, 32}, {50, 0, 70, 3}, {17, 16, 1, 1}}, rng);
  // GQA 2, head_dim 64, blocks of 1 (every position its own block); GQA 4, head_dim 32.
  check_wmma({{4, 2, 64, 1}, {31, 0, 10}, {16, 2, 1}}, rng);
  check_wmma({{4, 1, 32, 16}, {0, 40}, {40, 9}}, rng);
}

BOOST_AUTO_TEST_CASE(wmma_attention_refuses_what_it_cannot_run) {
  step_meta_buffer meta(step_caps{16, 4, 16});
  const kv_shape hd96{2, 2, 96, 16}, hd256{2, 2, 256, 16}, hd64{2, 2, 64, 16};
  // Nothing is launched (no pointers are touched) when the shape is not the kernel's.
  BOOST_TEST(!launch_paged_attention_wmma(meta.device(), nullptr, nullptr, nullptr, nullptr, 1, 2, hd96, 1.0f, nullptr));
  BOOST_TEST(!launch_paged_attention_wmma(meta.device(), nullptr, nullptr, nullptr, nullptr, 1, 2, hd256, 1.0f, nullptr));
  BOOST_TEST(!launch_paged_attention_wmma(meta.device(), nullptr, nullptr, nullptr, nullptr, 1, 65, hd64, 1.0f, nullptr));
  BOOST_TEST(paged_attention_wmma_smem_bytes(64) == 41472u);
  BOOST_TEST(paged_attention_wmma_smem_bytes(128) == 66048u);
  BOOST_TEST(paged_attention_wmma_smem_bytes(96) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
