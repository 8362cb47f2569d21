// Attention at the edges of its tiles, where an off-by-one hides in a whole-step error norm:
// prompts and chunks ending on and around the 16-row (a wmma warp), 32-key, and 32/64-row tile
// boundaries, decodes whose context does, and a short step that takes over the KV blocks, the
// output rows and the split partials a long step left behind. Each query row's own key dominates
// its scores (q = c k_own + noise: the own score is ~8c, the others ~N(0, c)), so a row that
// loses its diagonal key, or reads a stale key or partial, is wrong by O(1), not by a fraction
// of a percent. Both kernels: the CUDA-core one (attention.cu; with and without context splits)
// and the tensor-core prefill (attention_wmma.cu, through launch_attention as the executor runs
// it).
//
// Bounds: the reference is exact on the bf16 inputs, and the dominant weight is exp(0) = 1 in
// both kernels (the wmma kernel's bf16 P holds it exactly), so the error is the output's own
// bf16 rounding, at most 2^-9 relative per element: each (token, head) row within 4e-3. The
// mean signed error of all outputs, in bf16 units, stays within 0.05 (normalized_rows_round_
// without_bias says why). Rows past the step's tokens must keep what they held.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::gpu::testing {
namespace {

constexpr double kRowBound = 4e-3, kBiasBound = 0.05;
constexpr int32_t kSlackRows = 8;  // output rows past the step's tokens, which nothing may write

struct seq_spec {
  int32_t computed, len;
};

// The KV cache's host mirror: K and V of every (block, kv head, slot), as bf16 bits and values.
struct kv_mirror {
  std::vector<bf16_bits> k, v;
  std::vector<float> kf, vf;
  size_t off(const kv_shape& s, int32_t block, int32_t g, int32_t slot) const {
    return ((size_t(block) * s.n_kv + g) * s.block_size + slot) * s.head_dim;
  }
  void set(const kv_shape& s, int32_t block, int32_t g, int32_t slot, const std::vector<float>& kr, const std::vector<float>& vr) {
    for (int32_t d = 0; d < s.head_dim; ++d) {
      const size_t o = off(s, block, g, slot) + d;
      k[o] = model::fp32_to_bf16(kr[size_t(d)]);
      v[o] = model::fp32_to_bf16(vr[size_t(d)]);
      kf[o] = model::bf16_to_fp32(k[o]);
      vf[o] = model::bf16_to_fp32(v[o]);
    }
  }
};

std::vector<float> row_of(const std::vector<float>& v, size_t off, int32_t n) {
  return std::vector<float>(v.begin() + off, v.begin() + off + n);
}

// Plans sequences over the given blocks (in order), writes fresh K/V for every position of each
// sequence into `kv`, and returns the step with queries q = c (k_own + u) + noise per head.
struct dominant_step {
  step_plan plan;
  std::vector<bf16_bits> q;
  std::vector<float> qf;
  int32_t T = 0;
};

dominant_step make_step(const kv_shape& s, const std::vector<seq_spec>& specs, const std::vector<int32_t>& blocks,
                        const std::vector<float>& u, float c, kv_mirror& kv, std::mt19937& rng) {
  dominant_step st;
  const int32_t G = s.n_head / s.n_kv, hd = s.head_dim;
  size_t next = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    scheduled_seq sq;
    sq.id = int64_t(i);
    sq.num_computed_tokens = specs[i].computed;
    sq.tokens.assign(size_t(specs[i].len), 1);
    const int32_t ctx = specs[i].computed + specs[i].len;
    for (int32_t b = 0; b < (ctx + s.block_size - 1) / s.block_size; ++b) sq.block_table.push_back(blocks.at(next++));
    for (int32_t p = 0; p < ctx; ++p)
      for (int32_t g = 0; g < s.n_kv; ++g)
        kv.set(s, sq.block_table[size_t(p / s.block_size)], g, p % s.block_size, random_floats(rng, size_t(hd)), random_floats(rng, size_t(hd)));
    for (int32_t t = 0; t < specs[i].len; ++t) {
      const int32_t p = specs[i].computed + t, blk = sq.block_table[size_t(p / s.block_size)];
      for (int32_t h = 0; h < s.n_head; ++h) {
        const auto noise = random_floats(rng, size_t(hd), 0.1f);
        const size_t o = kv.off(s, blk, h / G, p % s.block_size);
        for (int32_t d = 0; d < hd; ++d) {
          st.q.push_back(model::fp32_to_bf16(c * (kv.kf[o + d] + u[size_t(d)]) + noise[size_t(d)]));
          st.qf.push_back(model::bf16_to_fp32(st.q.back()));
        }
      }
    }
    st.T += specs[i].len;
    st.plan.seqs.push_back(sq);
  }
  return st;
}

std::vector<double> reference(const step_plan& plan, const kv_shape& s, const std::vector<float>& q, const kv_mirror& kv, float scale) {
  const int32_t G = s.n_head / s.n_kv, hd = s.head_dim;
  std::vector<double> ref;
  size_t t = 0;
  for (const auto& sq : plan.seqs)
    for (size_t i = 0; i < sq.tokens.size(); ++i, ++t) {
      const int32_t pos = sq.num_computed_tokens + int32_t(i);
      for (int32_t h = 0; h < s.n_head; ++h) {
        auto off = [&](int32_t j) { return kv.off(s, sq.block_table[size_t(j / s.block_size)], h / G, j % s.block_size); };
        const float* qv = &q[(t * s.n_head + h) * hd];
        std::vector<double> w(size_t(pos) + 1);
        double mx = -INFINITY, sum = 0.0;
        for (int32_t j = 0; j <= pos; ++j) {
          double dot = 0.0;
          for (int32_t d = 0; d < hd; ++d) dot += double(qv[d]) * kv.kf[off(j) + d];
          mx = std::max(mx, w[size_t(j)] = dot * scale);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int32_t d = 0; d < hd; ++d) {
          double acc = 0.0;
          for (int32_t j = 0; j <= pos; ++j) acc += w[size_t(j)] / sum * kv.vf[off(j) + d];
          ref.push_back(acc);
        }
      }
    }
  return ref;
}

enum class kernel { cuda_core, cuda_core_split, wmma };
const char* name(kernel k) { return k == kernel::cuda_core ? "CUDA-core" : k == kernel::cuda_core_split ? "CUDA-core split" : "wmma"; }

/// Runs one step on `k`, into `out` (T + kSlackRows rows, holding whatever it held) with the
/// split partials in part_o/part_ml (sized for 8 splits), and checks it row by row.
void run_and_check(kernel k, const kv_shape& s, const dominant_step& st, int32_t tile_tokens, int32_t num_blocks, const kv_mirror& kv,
                   dev_array<bf16_bits>& out, dev_array<float>& part_o, dev_array<float>& part_ml, const std::string& what) {
  const int32_t G = s.n_head / s.n_kv, row = s.n_head * s.head_dim;
  const float scale = 1.0f / std::sqrt(float(s.head_dim));
  step_meta_buffer meta(step_caps{st.T, int32_t(st.plan.seqs.size()) + 1, num_blocks});
  const step_shape sh = meta.fill(st.plan, 0, tile_tokens, G, s.block_size, num_blocks);
  meta.upload(sh, nullptr);
  dev_array<bf16_bits> q(st.q), kc(kv.k), vc(kv.v);
  const auto before = out.download();
  attn_split sp;
  if (k == kernel::cuda_core_split) {
    sp.split_len = 32;
    sp.n_splits = 8;  // fixed, as a graph's: splits past a row's context write empty partials
    sp.part_o = part_o.get();
    sp.part_ml = part_ml.get();
  }
  if (k == kernel::wmma)
    launch_attention(meta.device(), as_bf16(q), as_bf16(kc), as_bf16(vc), as_bf16(out), st.T, sh.tiles, sh.prefill_tiles,
                     sh.max_tile_rows, s, scale, attn_split{}, nullptr);
  else
    launch_paged_attention(meta.device(), as_bf16(q), as_bf16(kc), as_bf16(vc), as_bf16(out), st.T, sh.tiles, sh.max_tile_rows, s,
                           scale, sp, nullptr);
  const auto got_bits = out.download();
  const auto got = to_float(got_bits);
  const auto ref = reference(st.plan, s, st.qf, kv, scale);
  BOOST_TEST_CONTEXT(name(k) << ", " << what << ", tile_tokens " << tile_tokens << ", head_dim " << s.head_dim << " G " << G
                             << " block " << s.block_size) {
    int32_t bad = 0, t = 0;
    for (const auto& sq : st.plan.seqs)
      for (size_t i = 0; i < sq.tokens.size(); ++i, ++t)
        for (int32_t h = 0; h < s.n_head; ++h) {
          const size_t o = (size_t(t) * s.n_head + h) * s.head_dim;
          const std::vector<float> r(ref.begin() + long(o), ref.begin() + long(o) + s.head_dim);
          const double err = rel_error(row_of(got, o, s.head_dim), r);
          if (!(err < kRowBound) && ++bad <= 8)
            BOOST_ERROR("sequence " << sq.id << " (" << sq.num_computed_tokens << " + " << sq.tokens.size() << " tokens): position "
                                    << sq.num_computed_tokens + int32_t(i) << " head " << h << ": row error " << err);
        }
    BOOST_TEST(bad == 0);
    const double bias = mean_ulp_error(std::vector<float>(got.begin(), got.begin() + size_t(st.T) * row), ref);
    BOOST_TEST(std::abs(bias) < kBiasBound, "mean signed error " << bias << " bf16 units");
    BOOST_TEST(std::equal(got_bits.begin() + size_t(st.T) * row, got_bits.end(), before.begin() + size_t(st.T) * row),
               "rows past the step's " << st.T << " tokens were written");
  }
}

std::vector<int32_t> shuffled(int32_t n, std::mt19937& rng) {
  std::vector<int32_t> p(size_t(n), 0);
  for (int32_t i = 0; i < n; ++i) p[size_t(i)] = i;
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

// Every length of `lens` as a whole prompt, as a 17-token chunk ending there (a 2-token one for
// the shortest), and as a decode's context, in one step per group of lengths.
void check_tile_edges(const std::vector<std::pair<kernel, int32_t>>& runs, const kv_shape& s, std::mt19937& rng) {
  const std::vector<std::vector<int32_t>> groups{{15, 16, 17, 31, 32, 33}, {63, 64, 65, 96}, {127, 128, 129}};
  const std::vector<float> u(size_t(s.head_dim), 0.0f);
  for (const auto& lens : groups) {
    std::vector<seq_spec> specs;
    int32_t blocks_needed = 0;
    for (int32_t L : lens)
      for (const seq_spec& sp : {seq_spec{0, L}, L > 17 ? seq_spec{L - 17, 17} : seq_spec{L - 2, 2}, seq_spec{L - 1, 1}}) {
        specs.push_back(sp);
        blocks_needed += (sp.computed + sp.len + s.block_size - 1) / s.block_size;
      }
    const int32_t num_blocks = blocks_needed + 2;
    kv_mirror kv;
    const size_t elems = size_t(num_blocks) * s.n_kv * s.block_size * s.head_dim;
    kv.k = random_bf16(rng, elems, 1.0f, &kv.kf);  // positions past each context hold other values
    kv.v = random_bf16(rng, elems, 1.0f, &kv.vf);
    const dominant_step st = make_step(s, specs, shuffled(num_blocks, rng), u, 3.0f, kv, rng);
    dev_array<float> part_o(size_t(st.T) * s.n_head * 8 * s.head_dim), part_ml(size_t(st.T) * s.n_head * 8 * 2);
    for (const auto& [k, tile] : runs) {
      dev_array<bf16_bits> out(size_t(st.T + kSlackRows) * s.n_head * s.head_dim);
      out.poison();
      part_o.poison();
      part_ml.poison();
      run_and_check(k, s, st, tile, num_blocks, kv, out, part_o, part_ml, "lengths " + std::to_string(lens.front()) + ".." + std::to_string(lens.back()));
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_attention_edges, *boost::unit_test::precondition(have_gpu))

// Query tiles of 32 and 64 rows (16 and 32 tokens at G = 2); the context split at 32 positions.
BOOST_AUTO_TEST_CASE(cuda_core_attention_at_tile_edges) {
  std::mt19937 rng(31);
  check_tile_edges({{kernel::cuda_core, 16}, {kernel::cuda_core, 32}, {kernel::cuda_core_split, 32}}, kv_shape{4, 2, 64, 16}, rng);
}

// Prompt tiles of 64 rows (G = 1, the executor's tile) and of 32 tokens at G = 2 (a warp's 16
// rows are 8 tokens), decode tiles and one-token prompt tails on the CUDA-core kernel.
BOOST_AUTO_TEST_CASE(wmma_attention_at_tile_edges) {
  std::mt19937 rng(32);
  check_tile_edges({{kernel::wmma, 64}}, kv_shape{2, 2, 64, 16}, rng);
  check_tile_edges({{kernel::wmma, 32}}, kv_shape{4, 2, 64, 32}, rng);
}

// A long step (a 40-token chunk at positions 89..128 of one sequence) leaves its K/V in every
// block, its outputs in the output rows and its partials in every split; then three short
// sequences take those blocks over (a prompt of 17, a decode at context 33, a chunk ending at 32)
// with keys that the stale ones outscore: stale K is 2u, and the short step's queries are
// c (k_own + u). Any stale key, row or partial that leaks in is a wrong row.
BOOST_AUTO_TEST_CASE(short_step_on_blocks_a_long_one_used) {
  std::mt19937 rng(33);
  const kv_shape s{4, 2, 64, 16};
  const int32_t num_blocks = 9;  // 129 positions
  const std::vector<float> u = random_floats(rng, size_t(s.head_dim)), zero(size_t(s.head_dim), 0.0f);
  for (kernel k : {kernel::cuda_core_split, kernel::wmma}) {
    kv_mirror kv;
    const size_t elems = size_t(num_blocks) * s.n_kv * s.block_size * s.head_dim;
    kv.k = random_bf16(rng, elems, 1.0f, &kv.kf);
    kv.v = random_bf16(rng, elems, 1.0f, &kv.vf);
    const auto blocks = shuffled(num_blocks, rng);
    dominant_step longer = make_step(s, {{89, 40}}, blocks, zero, 3.0f, kv, rng);
    for (size_t o = 0; o < kv.k.size(); o += size_t(s.head_dim)) {  // the long context's keys: 2u, values far off
      std::vector<float> kr(u), vr = random_floats(rng, size_t(s.head_dim));
      for (int32_t d = 0; d < s.head_dim; ++d) kr[size_t(d)] *= 2.0f, vr[size_t(d)] += 4.0f;
      const int32_t block = int32_t(o / (size_t(s.n_kv) * s.block_size * s.head_dim)), rest = int32_t(o / size_t(s.head_dim));
      kv.set(s, block, rest / s.block_size % s.n_kv, rest % s.block_size, kr, vr);
    }
    const int32_t rows = 40 + kSlackRows;
    dev_array<bf16_bits> out(size_t(rows) * s.n_head * s.head_dim);
    dev_array<float> part_o(size_t(rows) * s.n_head * 8 * s.head_dim), part_ml(size_t(rows) * s.n_head * 8 * 2);
    out.poison();
    part_o.poison();
    part_ml.poison();
    {  // the long step itself: attention over the 2u keys is flat, so its rows are only checked as a whole
      step_meta_buffer meta(step_caps{40, 2, num_blocks});
      const step_shape sh = meta.fill(longer.plan, 0, 32, 2, s.block_size, num_blocks);
      meta.upload(sh, nullptr);
      dev_array<bf16_bits> q(longer.q), kc(kv.k), vc(kv.v);
      attn_split sp{8, 32, nullptr, part_o.get(), part_ml.get()};
      launch_paged_attention(meta.device(), as_bf16(q), as_bf16(kc), as_bf16(vc), as_bf16(out), 40, sh.tiles, sh.max_tile_rows, s,
                             1.0f / std::sqrt(float(s.head_dim)), sp, nullptr);
      std::vector<float> ref;
      for (double x : reference(longer.plan, s, longer.qf, kv, 1.0f / std::sqrt(float(s.head_dim)))) ref.push_back(float(x));
      const auto got = to_float(out.download());
      BOOST_TEST(rel_error(std::vector<float>(got.begin(), got.begin() + ref.size()), ref) < bf16_bound);
    }
    std::vector<int32_t> reused(blocks);  // the same blocks, handed out in another order
    std::shuffle(reused.begin(), reused.end(), rng);
    const dominant_step shorter = make_step(s, {{0, 17}, {32, 1}, {16, 16}}, reused, u, 3.0f, kv, rng);
    run_and_check(k, s, shorter, 32, num_blocks, kv, out, part_o, part_ml, "short step after a long one");
  }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
