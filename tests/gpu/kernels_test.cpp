// Each element-wise kernel and the GEMM against a CPU reference on fresh random inputs, outputs
// poisoned (NaN) before every run: embedding, RMSNorm (+ residual, + row gather), RoPE + KV
// write, SwiGLU, cuBLASLt GEMM (f32 and bf16 outputs).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "gpu/gemm.hpp"
#include "gpu/step_meta.hpp"
#include "gpu_support.hpp"
#include "model/cpu_ops.hpp"

namespace conveyor::gpu::testing {

BOOST_AUTO_TEST_SUITE(gpu_kernels, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(embedding_gathers_rows) {
  std::mt19937 rng(1);
  for (int32_t d : {96, 100}) {  // vectorized and scalar paths
    const int32_t V = 300, T = 17;
    std::vector<float> table_f;
    dev_array<bf16_bits> table(random_bf16(rng, size_t(V) * d, 1.0f, &table_f));
    std::vector<int32_t> tok(T);
    for (auto& t : tok) t = static_cast<int32_t>(rng() % V);
    dev_array<int32_t> dtok(tok);
    dev_array<float> x(size_t(T) * d);
    x.poison();
    launch_embedding(dtok.get(), as_bf16(table), x.get(), T, d, nullptr);
    std::vector<float> ref(size_t(T) * d);
    for (int32_t t = 0; t < T; ++t)
      for (int32_t j = 0; j < d; ++j) ref[size_t(t) * d + j] = table_f[size_t(tok[t]) * d + j];
    BOOST_TEST(rel_error(x.download(), ref) == 0.0);
  }
}

// Rows of unit scale, and rows whose mean square (~1e-5) is comparable to eps, where it matters
// where eps enters the formula.
BOOST_AUTO_TEST_CASE(rmsnorm_with_residual_and_rows) {
  std::mt19937 rng(2);
  const int32_t T = 13, d = 576;
  const float eps = 1e-5f;
  auto w0 = random_floats(rng, d, 0.1f);
  for (auto& v : w0) v += 1.0f;
  dev_array<float> w(w0);
  const std::vector<int32_t> rows_h{12, 3, 7};
  dev_array<int32_t> rows(rows_h);
  for (int c = 0; c < 6; ++c) {  // plain, + residual, + residual on gathered rows; each at two scales
    const int variant = c % 3;
    const float scale = c < 3 ? 2.0f : 3e-3f;
    const auto x0 = random_floats(rng, size_t(T) * d, scale), delta0 = random_floats(rng, size_t(T) * d, scale / 4);
    dev_array<float> x(x0), delta(delta0);
    const int32_t n = variant == 2 ? 3 : T;
    dev_array<bf16_bits> out(size_t(n) * d);
    out.poison();
    launch_rmsnorm(x.get(), variant ? delta.get() : nullptr, variant == 2 ? rows.get() : nullptr, w.get(), as_bf16(out), n, d, eps, nullptr);
    std::vector<float> xs = x0, ref(size_t(n) * d);
    for (int32_t i = 0; i < n; ++i) {
      const int32_t r = variant == 2 ? rows_h[i] : i;
      if (variant)
        for (int32_t j = 0; j < d; ++j) xs[size_t(r) * d + j] += delta0[size_t(r) * d + j];
      model::rms_norm(&xs[size_t(r) * d], w0.data(), &ref[size_t(i) * d], d, eps);
    }
    BOOST_TEST_CONTEXT("scale " << scale << " variant " << variant) {
      BOOST_TEST(rel_error(to_float(out.download()), ref) < bf16_bound);
      if (variant == 1) BOOST_TEST(rel_error(x.download(), xs) < f32_bound);
    }
  }
}

BOOST_AUTO_TEST_CASE(rope_and_kv_write) {
  std::mt19937 rng(3);
  for (int32_t n_rot : {32, 16}) {
    const kv_shape s{4, 2, 32, 4};
    const int32_t width = (s.n_head + 2 * s.n_kv) * s.head_dim, num_blocks = 16;
    step_plan plan;
    const int32_t computed[] = {2, 9, 0}, lens[] = {5, 1, 3};
    std::vector<int32_t> perm(num_blocks);
    for (int32_t i = 0; i < num_blocks; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    int32_t next = 0;
    for (int32_t q = 0; q < 3; ++q) {
      scheduled_seq sq;
      sq.id = q;
      sq.num_computed_tokens = computed[q];
      for (int32_t i = 0; i < lens[q]; ++i) sq.tokens.push_back(i);
      for (int32_t b = 0; b < (computed[q] + lens[q] + 3) / 4; ++b) sq.block_table.push_back(perm[next++]);
      plan.seqs.push_back(sq);
    }
    step_meta_buffer meta(step_caps{64, 8, 64});
    const step_shape sh = meta.fill(plan, 0, 8, 2, s.block_size, num_blocks);
    meta.upload(sh, nullptr);
    const int32_t T = sh.tokens, max_pos = 16;
    std::vector<float> c(n_rot / 2), sn(n_rot / 2);
    std::vector<float2> rope(size_t(max_pos) * (n_rot / 2));
    for (int32_t p = 0; p < max_pos; ++p) {
      model::rope_angles(p, n_rot, 10000.0f, nullptr, c.data(), sn.data());
      for (int32_t i = 0; i < n_rot / 2; ++i) rope[size_t(p) * (n_rot / 2) + i] = float2{c[i], sn[i]};
    }
    dev_array<float2> drope(rope);
    const auto qkv0 = random_floats(rng, size_t(T) * width);
    dev_array<float> qkv(qkv0);
    dev_array<bf16_bits> q_out(size_t(T) * s.n_head * s.head_dim);
    const size_t cache_elems = size_t(num_blocks) * s.n_kv * s.block_size * s.head_dim;
    dev_array<bf16_bits> kc(cache_elems), vc(cache_elems);
    q_out.poison();
    kc.poison();
    vc.poison();
    launch_rope_kv_write(meta.device(), qkv.get(), drope.get(), as_bf16(q_out), as_bf16(kc), as_bf16(vc), T, s, n_rot, nullptr);
    const auto qg = to_float(q_out.download()), kg = to_float(kc.download()), vg = to_float(vc.download());
    std::vector<float> q_ref, q_got, kv_ref, kv_got;
    int32_t t = 0;
    for (const auto& sq : plan.seqs)
      for (size_t i = 0; i < sq.tokens.size(); ++i, ++t) {
        const int32_t pos = sq.num_computed_tokens + static_cast<int32_t>(i);
        std::vector<float> row(qkv0.begin() + size_t(t) * width, qkv0.begin() + size_t(t + 1) * width);
        model::rope_angles(pos, n_rot, 10000.0f, nullptr, c.data(), sn.data());
        model::rope_apply(row.data(), s.n_head + s.n_kv, s.head_dim, n_rot, c.data(), sn.data());
        for (int32_t j = 0; j < s.n_head * s.head_dim; ++j) {
          q_ref.push_back(row[j]);
          q_got.push_back(qg[size_t(t) * s.n_head * s.head_dim + j]);
        }
        const int32_t blk = sq.block_table[size_t(pos / s.block_size)], slot = pos % s.block_size;
        for (int32_t g = 0; g < s.n_kv; ++g)
          for (int32_t dd = 0; dd < s.head_dim; ++dd) {
            const size_t off = ((size_t(blk) * s.n_kv + g) * s.block_size + slot) * s.head_dim + dd;
            kv_ref.push_back(row[(s.n_head + g) * s.head_dim + dd]);
            kv_got.push_back(kg[off]);
            kv_ref.push_back(row[(s.n_head + s.n_kv + g) * s.head_dim + dd]);
            kv_got.push_back(vg[off]);
          }
      }
    BOOST_TEST_CONTEXT("n_rot " << n_rot) {
      BOOST_TEST(rel_error(q_got, q_ref) < bf16_bound);
      BOOST_TEST(rel_error(kv_got, kv_ref) < bf16_bound);
    }
  }
}

BOOST_AUTO_TEST_CASE(swiglu_matches_silu_mul) {
  std::mt19937 rng(4);
  for (int32_t ff : {100, 33}) {  // paired and scalar paths
    const int32_t T = 7;
    std::vector<float> gu_f;
    dev_array<bf16_bits> gu(random_bf16(rng, size_t(T) * 2 * ff, 2.0f, &gu_f));
    dev_array<bf16_bits> out(size_t(T) * ff);
    out.poison();
    launch_swiglu(as_bf16(gu), as_bf16(out), T, ff, nullptr);
    std::vector<float> ref(size_t(T) * ff);
    for (int32_t t = 0; t < T; ++t) model::silu_mul(&gu_f[size_t(t) * 2 * ff], &gu_f[size_t(t) * 2 * ff + ff], &ref[size_t(t) * ff], ff);
    BOOST_TEST(rel_error(to_float(out.download()), ref) < bf16_bound, "ff " << ff);
  }
}

BOOST_AUTO_TEST_CASE(gemm_f32_and_bf16_outputs) {
  std::mt19937 rng(5);
  gemm_runner g;
  struct shape { int32_t m, n, k; };
  for (const shape sh : {shape{5, 72, 96}, shape{64, 256, 512}, shape{3, 269, 96}, shape{1, 160, 96}}) {
    std::vector<float> a_f, w_f;
    dev_array<bf16_bits> a(random_bf16(rng, size_t(sh.m) * sh.k, 1.0f, &a_f)), w(random_bf16(rng, size_t(sh.n) * sh.k, 0.05f, &w_f));
    std::vector<float> ref(size_t(sh.m) * sh.n);
    for (int32_t i = 0; i < sh.m; ++i)
      for (int32_t j = 0; j < sh.n; ++j) {
        double acc = 0.0;
        for (int32_t k = 0; k < sh.k; ++k) acc += double(a_f[size_t(i) * sh.k + k]) * w_f[size_t(j) * sh.k + k];
        ref[size_t(i) * sh.n + j] = static_cast<float>(acc);
      }
    dev_array<float> c32(ref.size());
    dev_array<bf16_bits> c16(ref.size());
    c32.poison();
    c16.poison();
    g.run(as_bf16(a), as_bf16(w), c32.get(), true, sh.m, sh.n, sh.k, 0.0f, nullptr);
    g.run(as_bf16(a), as_bf16(w), c16.get(), false, sh.m, sh.n, sh.k, 0.0f, nullptr);
    BOOST_TEST_CONTEXT("m " << sh.m << " n " << sh.n << " k " << sh.k) {
      BOOST_TEST(rel_error(c32.download(), ref) < f32_bound);
      BOOST_TEST(rel_error(to_float(c16.download()), ref) < bf16_bound);
    }
  }
}

// Every batch size 1..200 through one runner: right products, and a bounded plan cache (one
// plan per power-of-two class of m, not one per m: a server sees every m up to its token budget).
BOOST_AUTO_TEST_CASE(gemm_plans_bounded_over_every_m) {
  std::mt19937 rng(8);
  gemm_runner g;
  const int32_t n = 48, k = 64, max_m = 200;
  std::vector<float> a_f, w_f;
  dev_array<bf16_bits> a(random_bf16(rng, size_t(max_m) * k, 1.0f, &a_f)), w(random_bf16(rng, size_t(n) * k, 0.05f, &w_f));
  dev_array<float> c(size_t(max_m) * n);
  for (int32_t m = 1; m <= max_m; ++m) {
    c.poison();
    g.run(as_bf16(a), as_bf16(w), c.get(), true, m, n, k, 0.0f, nullptr);
    if (m % 37 != 1 && m != max_m) continue;
    const auto got = c.download();
    std::vector<float> out(got.begin(), got.begin() + size_t(m) * n), ref(size_t(m) * n);
    for (int32_t i = 0; i < m; ++i)
      for (int32_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int32_t q = 0; q < k; ++q) acc += double(a_f[size_t(i) * k + q]) * w_f[size_t(j) * k + q];
        ref[size_t(i) * n + j] = static_cast<float>(acc);
      }
    BOOST_TEST(rel_error(out, ref) < f32_bound, "m " << m);
    if (m < max_m) BOOST_TEST(!all_finite(std::vector<float>(got.begin() + size_t(m) * n, got.end())));  // rows past m untouched
  }
  BOOST_TEST(g.plan_count() <= 9u, g.plan_count() << " cached GEMM plans for one (n, k)");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
