// Each element-wise kernel and the GEMM against a CPU reference on fresh random inputs, outputs
// poisoned (NaN) before every run: embedding, RMSNorm (+ residual, + row gather), SwiGLU,
// cuBLASLt GEMM (f32 and bf16 outputs, beta = 1 accumulation). RoPE + KV write: rope_kv_test.cpp.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "gpu/gemm.hpp"
#include "gpu_support.hpp"
#include "model/cpu/cpu_ops.hpp"

namespace conveyor::gpu::testing {

BOOST_AUTO_TEST_SUITE(gpu_kernels, *boost::unit_test::precondition(have_gpu))

BOOST_AUTO_TEST_CASE(embedding_gathers_rows_and_previous_samples) {
  std::mt19937 rng(1);
  for (int32_t d : {96, 100}) {  // vectorized and scalar paths
    const int32_t V = 300, T = 17;
    std::vector<float> table_f;
    dev_array<bf16_bits> table(random_bf16(rng, size_t(V) * d, 1.0f, &table_f));
    std::vector<int32_t> tok(T), prev(5), id(T);
    for (auto& p : prev) p = static_cast<int32_t>(rng() % V);
    for (int32_t t = 0; t < T; ++t) {  // every third token: the previous step's sample of row t % 5
      tok[t] = t % 3 == 1 ? -1 - t % 5 : static_cast<int32_t>(rng() % V);
      id[t] = tok[t] < 0 ? prev[t % 5] : tok[t];
    }
    dev_array<int32_t> dtok(tok), dprev(prev);
    dev_array<float> x(size_t(T) * d);
    x.poison();
    launch_embedding(dtok.get(), dprev.get(), as_bf16(table), x.get(), T, d, nullptr);
    std::vector<float> ref(size_t(T) * d);
    for (int32_t t = 0; t < T; ++t)
      for (int32_t j = 0; j < d; ++j) ref[size_t(t) * d + j] = table_f[size_t(id[t]) * d + j];
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

// beta = 1 in place (C is D): the O and down projections add into the residual stream x this
// way (gpu/cuda_forward.cpp), at decode and prefill row counts.
BOOST_AUTO_TEST_CASE(gemm_accumulates_into_c_with_beta_1) {
  std::mt19937 rng(9);
  gemm_runner g;
  struct shape { int32_t m, n, k; };
  for (const shape sh : {shape{1, 96, 160}, shape{7, 75, 96}, shape{40, 96, 64}}) {
    std::vector<float> a_f, w_f;
    dev_array<bf16_bits> a(random_bf16(rng, size_t(sh.m) * sh.k, 1.0f, &a_f)), w(random_bf16(rng, size_t(sh.n) * sh.k, 0.05f, &w_f));
    std::vector<float> ref = random_floats(rng, size_t(sh.m) * sh.n, 2.0f);
    dev_array<float> c(ref);
    for (int32_t i = 0; i < sh.m; ++i)
      for (int32_t j = 0; j < sh.n; ++j) {
        double acc = ref[size_t(i) * sh.n + j];
        for (int32_t k = 0; k < sh.k; ++k) acc += double(a_f[size_t(i) * sh.k + k]) * w_f[size_t(j) * sh.k + k];
        ref[size_t(i) * sh.n + j] = static_cast<float>(acc);
      }
    g.run(as_bf16(a), as_bf16(w), c.get(), true, sh.m, sh.n, sh.k, 1.0f, nullptr);
    BOOST_TEST(rel_error(c.download(), ref) < f32_bound, "m " << sh.m << " n " << sh.n << " k " << sh.k);
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
    if (m < max_m) BOOST_TEST(still_poison(std::vector<float>(got.begin() + size_t(m) * n, got.end())));  // rows past m untouched
  }
  BOOST_TEST(g.plan_count() <= 9u, g.plan_count() << " cached GEMM plans for one (n, k)");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::gpu::testing
