// The fused decode GEMVs (gpu/fused_gemv.cu) against a host reference built from model/cpu/cpu_ops
// (the CPU executor's own functions): RMSNorm of the step's rows rounded to bf16 (the GEMM input
// of the cuBLASLt path), products in double, then bias, RoPE and the K/V cache slots, or SwiGLU.
// Every row count the kernels take (T = 1..kFusedMaxRows), each arch switch (bias, NEOX pairs,
// partial rotation, GQA, the raw f32 output qwen3's head norms need), 16-byte and scalar weight
// loads (d = 75, a multiple of nothing useful), and grids of 1 SM (warps stride over several
// pair units) and of 132. Outputs poisoned (NaN) before every run.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"
#include "model/cpu/cpu_ops.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::gpu::testing {
namespace {

constexpr float kEps = 1e-5f;

// The normalized rows as the device rounds them: (T, d) values exactly representable in bf16.
std::vector<float> normed_bf16(const std::vector<float>& x, const std::vector<float>& w, int32_t T, int32_t d) {
  std::vector<float> h(size_t(T) * d);
  for (int32_t t = 0; t < T; ++t) model::rms_norm(&x[size_t(t) * d], w.data(), &h[size_t(t) * d], d, kEps);
  for (float& v : h) v = model::bf16_to_fp32(model::fp32_to_bf16(v));
  return h;
}

// out (T, n) = h (T, d) . W (n, d)^T in double.
std::vector<float> matmul_t(const std::vector<float>& h, const std::vector<float>& W, int32_t T, int32_t n, int32_t d) {
  std::vector<float> out(size_t(T) * n);
  for (int32_t t = 0; t < T; ++t)
    for (int32_t r = 0; r < n; ++r) {
      double acc = 0.0;
      for (int32_t k = 0; k < d; ++k) acc += double(h[size_t(t) * d + k]) * W[size_t(r) * d + k];
      out[size_t(t) * n + r] = static_cast<float>(acc);
    }
  return out;
}

struct qkv_case {
  kv_shape s;
  int32_t d, n_rot;
  bool neox, bias, raw;
};

std::ostream& operator<<(std::ostream& o, const qkv_case& c) {
  return o << "d " << c.d << " heads " << c.s.n_head << "/" << c.s.n_kv << " hd " << c.s.head_dim << " n_rot " << c.n_rot
           << (c.neox ? " neox" : " norm") << (c.bias ? " +bias" : "") << (c.raw ? " raw" : "");
}

// T sequences decoding one token each at positions 2, 7, 12, ... over shuffled blocks.
void check_qkv(const qkv_case& c, int32_t T, int32_t sm_count, std::mt19937& rng) {
  const kv_shape& s = c.s;
  const int32_t hd = s.head_dim, width = (s.n_head + 2 * s.n_kv) * hd, num_blocks = 96, half = c.n_rot / 2, d = c.d;
  step_plan plan;
  std::vector<int32_t> perm(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  int32_t next = 0;
  for (int32_t q = 0; q < T; ++q) {
    scheduled_seq sq;
    sq.id = q;
    sq.num_computed_tokens = 2 + 5 * q;
    sq.tokens = {q};
    for (int32_t b = 0; b < (sq.num_computed_tokens + 1 + s.block_size - 1) / s.block_size; ++b) sq.block_table.push_back(perm[next++]);
    plan.seqs.push_back(sq);
  }
  step_meta_buffer meta(step_caps{64, 8, 128});
  const step_shape sh = meta.fill(plan, 0, 8, 2, s.block_size, num_blocks);
  meta.upload(sh, nullptr);
  const int32_t max_pos = 48;
  std::vector<float> cs(half), sn(half);
  std::vector<float2> rope(size_t(max_pos) * half);
  for (int32_t p = 0; p < max_pos; ++p) {
    model::rope_angles(p, c.n_rot, 10000.0f, nullptr, cs.data(), sn.data(), 1.0f);
    for (int32_t i = 0; i < half; ++i) rope[size_t(p) * half + i] = float2{cs[i], sn[i]};
  }
  const auto x0 = random_floats(rng, size_t(T) * d, 2.0f), bias0 = random_floats(rng, width, 0.5f);
  auto w0 = random_floats(rng, d, 0.3f);
  for (float& v : w0) v += 1.0f;
  std::vector<float> W;
  dev_array<bf16_bits> dW(random_bf16(rng, size_t(width) * d, 0.1f, &W));
  dev_array<float> x(x0), w(w0), bias(bias0), raw(size_t(T) * width);
  dev_array<float2> drope(rope);
  dev_array<bf16_bits> q_out(size_t(T) * s.n_head * hd);
  const size_t cache_elems = size_t(num_blocks) * s.n_kv * s.block_size * hd;
  dev_array<bf16_bits> kc(cache_elems), vc(cache_elems);
  raw.poison();
  q_out.poison();
  kc.poison();
  vc.poison();
  rope_kv_args a;
  a.n_rot = c.n_rot;
  a.neox = c.neox;
  a.bias = c.bias ? bias.get() : nullptr;
  launch_fused_norm_qkv(meta.device(), {x.get(), w.get(), T, d, kEps}, as_bf16(dW), drope.get(), s, a,
                        c.raw ? raw.get() : nullptr, as_bf16(q_out), as_bf16(kc), as_bf16(vc), sm_count, nullptr);
  const std::vector<float> prod = matmul_t(normed_bf16(x0, w0, T, d), W, T, width, d);
  BOOST_TEST_CONTEXT(c << " T " << T << " sm_count " << sm_count) {
    if (c.raw) {  // f32 products: only the order of the sums differs
      BOOST_TEST(rel_error(raw.download(), prod) < f32_bound);
      return;
    }
    const auto qg = to_float(q_out.download()), kg = to_float(kc.download()), vg = to_float(vc.download());
    std::vector<float> q_ref, q_got, k_ref, k_got, v_ref, v_got;
    for (int32_t t = 0; t < T; ++t) {
      const scheduled_seq& sq = plan.seqs[size_t(t)];
      const int32_t pos = sq.num_computed_tokens;
      std::vector<float> row(prod.begin() + size_t(t) * width, prod.begin() + size_t(t + 1) * width);
      if (c.bias)
        for (int32_t j = 0; j < width; ++j) row[j] += bias0[j];
      model::rope_angles(pos, c.n_rot, 10000.0f, nullptr, cs.data(), sn.data(), 1.0f);
      model::rope_apply(row.data(), s.n_head + s.n_kv, hd, c.n_rot, cs.data(), sn.data(), c.neox);
      for (int32_t j = 0; j < s.n_head * hd; ++j) {
        q_ref.push_back(row[j]);
        q_got.push_back(qg[size_t(t) * s.n_head * hd + j]);
      }
      const int32_t blk = sq.block_table[size_t(pos / s.block_size)], slot = pos % s.block_size;
      for (int32_t g = 0; g < s.n_kv; ++g)
        for (int32_t dd = 0; dd < hd; ++dd) {
          const size_t off = ((size_t(blk) * s.n_kv + g) * s.block_size + slot) * hd + dd;
          k_ref.push_back(row[(s.n_head + g) * hd + dd]);
          k_got.push_back(kg[off]);
          v_ref.push_back(row[(s.n_head + s.n_kv + g) * hd + dd]);
          v_got.push_back(vg[off]);
        }
    }
    BOOST_TEST(rel_error(q_got, q_ref) < bf16_bound);
    BOOST_TEST(rel_error(k_got, k_ref) < bf16_bound);
    BOOST_TEST(rel_error(v_got, v_ref) < bf16_bound);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(gpu_kernels, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(fused_norm_qkv_rope_and_kv_write) {
  std::mt19937 rng(11);
  BOOST_TEST_REQUIRE(fused_gemv_max_rows(128) == kFusedMaxRows);
  const qkv_case cases[] = {
      {{4, 2, 32, 4}, 96, 32, false, false, false},  // llama: adjacent pairs, GQA
      {{4, 2, 32, 4}, 96, 16, true, true, false},    // qwen2: bias, partial NEOX rotation
      {{2, 1, 64, 8}, 128, 64, true, true, false},   // NEOX over a whole head of 64
      {{3, 1, 16, 4}, 75, 16, false, true, false},   // odd width: scalar weight loads
      {{4, 2, 64, 4}, 96, 64, true, false, true},    // qwen3: raw f32 out for rope_kv_write
  };
  for (const qkv_case& c : cases)
    for (int32_t T = 1; T <= kFusedMaxRows; ++T) check_qkv(c, T, T % 2 ? 1 : 132, rng);
  // Head norms without the raw output would be skipped silently: refused.
  dev_array<float> buf(64);
  rope_kv_args a;
  a.n_rot = 32;
  a.q_norm = a.k_norm = buf.get();
  BOOST_CHECK_THROW(launch_fused_norm_qkv(step_meta{}, {buf.get(), buf.get(), 1, 32, kEps}, nullptr, nullptr, kv_shape{1, 1, 32, 4},
                                          a, nullptr, nullptr, nullptr, nullptr, 1, nullptr),
                    std::runtime_error);
}

// Gate rows of std 1 against up rows of 0.1 would hide little; both random, and a norm weight
// of 1 +- 0.3 so that a prologue without it is far off.
BOOST_AUTO_TEST_CASE(fused_norm_gate_up_swiglu) {
  std::mt19937 rng(12);
  struct shape { int32_t d, ff; };
  for (const shape sh : {shape{96, 40}, shape{75, 33}})
    for (int32_t T = 1; T <= kFusedMaxRows; ++T) {
      const auto x0 = random_floats(rng, size_t(T) * sh.d, 2.0f);
      auto w0 = random_floats(rng, sh.d, 0.3f);
      for (float& v : w0) v += 1.0f;
      std::vector<float> W;
      dev_array<bf16_bits> dW(random_bf16(rng, size_t(2) * sh.ff * sh.d, 0.2f, &W));
      dev_array<float> x(x0), w(w0);
      dev_array<bf16_bits> act(size_t(T) * sh.ff);
      act.poison();
      launch_fused_norm_gate_up({x.get(), w.get(), T, sh.d, kEps}, as_bf16(dW), sh.ff, as_bf16(act), T % 2 ? 1 : 132, nullptr);
      const std::vector<float> gu = matmul_t(normed_bf16(x0, w0, T, sh.d), W, T, 2 * sh.ff, sh.d);
      std::vector<float> ref(size_t(T) * sh.ff);
      for (int32_t t = 0; t < T; ++t)
        model::silu_mul(&gu[size_t(t) * 2 * sh.ff], &gu[size_t(t) * 2 * sh.ff + sh.ff], &ref[size_t(t) * sh.ff], sh.ff);
      BOOST_TEST(rel_error(to_float(act.download()), ref) < bf16_bound, "d " << sh.d << " ff " << sh.ff << " T " << T);
    }
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
