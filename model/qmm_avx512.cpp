// AVX-512 legacy qmm kernel (qmm_kernels.hpp). The quantized types (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0)
// run in qmm_avx512_q.cpp (VNNI, blocks per lane); this file holds the F32 / F16 / BF16 tiles
// (R weight rows x N tokens of 8-lane f32 accumulators, 256-bit vectors with all 32 registers)
// and the dispatch.
// NOTE: batch invariance: every (row, token) pair runs the same float operations in the same
// lane arrangement whatever the tile.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "model/qmm_kernels.hpp"

#define CV_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace conveyor::model {

void qmm_legacy_avx512_quant(const qmm_job& j);  // qmm_avx512_q.cpp

namespace {

constexpr int kRows = 4;     // tile rows for m > 1
constexpr int kToks = 4;     // tile tokens for m > 1
constexpr int kRowsM1 = 8;   // tile rows for m == 1
constexpr int kRowsMax = 8;
constexpr int kChunk = 64;   // tokens per pass over the weights: their activations stay in L2

/// One row tile: its rows.
struct rows_ctx {
  int32_t r0;  // row index of w[0]
  const uint8_t* w[kRowsMax];
};

CV_AVX512 inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

CV_AVX512 inline void store(const qmm_job& j, int32_t t, int32_t r, float v) {
  float& o = j.c[static_cast<size_t>(t) * static_cast<size_t>(j.ldc) + static_cast<size_t>(r)];
  o = j.accumulate ? o + v : v;
}

/// Eight consecutive weights of an F32 / F16 / BF16 row as f32.
template <ggml_type T> CV_AVX512 inline __m256 load8(const uint8_t* p) {
  if constexpr (T == ggml_type::f32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (T == ggml_type::f16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <ggml_type T> CV_AVX512 inline float load1(const uint8_t* p, int32_t i) {
  uint32_t v = 0;
  if constexpr (T == ggml_type::f32) {
    std::memcpy(&v, p + 4 * static_cast<size_t>(i), 4);
  } else {
    uint16_t h;
    std::memcpy(&h, p + 2 * static_cast<size_t>(i), 2);
    if constexpr (T == ggml_type::f16) return _cvtsh_ss(h);
    v = static_cast<uint32_t>(h) << 16;
  }
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}

template <ggml_type T, int R, int N>
CV_AVX512 void tile_f(const qmm_job& j, const rows_ctx& rc, int ri, int32_t t0) {
  constexpr size_t es = T == ggml_type::f32 ? 4 : 2;
  const int32_t k8 = j.k & ~7;
  const float* a[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) a[t] = reinterpret_cast<const float*>(j.act + static_cast<size_t>(t0 + t) * j.act_stride);
  __m256 acc[R][N];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int32_t i = 0; i < k8; i += 8) {
    __m256 w[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = load8<T>(rc.w[ri + r] + es * static_cast<size_t>(i));
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const __m256 av = _mm256_loadu_ps(a[t] + i);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(w[r], av, acc[r][t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t)
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m128 s = _mm_set_ss(hsum(acc[r][t]));
      for (int32_t i = k8; i < j.k; ++i) {
        float x;
        std::memcpy(&x, a[t] + i, 4);
        s = _mm_fmadd_ss(_mm_set_ss(load1<T>(rc.w[ri + r], i)), _mm_set_ss(x), s);
      }
      store(j, t0 + t, rc.r0 + ri + r, _mm_cvtss_f32(s));
    }
}

using tile_fn = void (*)(const qmm_job&, const rows_ctx&, int, int32_t);

template <ggml_type T, int R, int N> constexpr tile_fn pick() {
  if constexpr (R > kRows && N > 1) return nullptr;  // never used: wide tiles only at m == 1
  else return &tile_f<T, R, N>;
}

template <ggml_type T, size_t... I>
constexpr std::array<tile_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{pick<T, static_cast<int>(I) / kToks + 1, static_cast<int>(I) % kToks + 1>()...}};
}

template <ggml_type T> CV_AVX512 void run(const qmm_job& j) {
  static constexpr auto table = make_table<T>(std::make_index_sequence<kRowsMax * kToks>{});
  const int rt = j.m == 1 ? kRowsM1 : kRows, nt = j.m == 1 ? 1 : kToks;
  rows_ctx rc{};
  for (int32_t tc = 0; tc < j.m; tc += kChunk) {
    const int32_t te = std::min(j.m, tc + kChunk);
    for (int32_t r0 = 0; r0 < j.n_rows; r0 += rt) {
      const int rn = std::min(rt, j.n_rows - r0);
      rc.r0 = r0;
      for (int i = 0; i < rn; ++i) rc.w[i] = j.w + static_cast<size_t>(r0 + i) * j.w_row_bytes;
      for (int32_t t0 = tc; t0 < te; t0 += nt) {
        const int tn = std::min(nt, te - t0);
        table[static_cast<size_t>((rn - 1) * kToks + tn - 1)](j, rc, 0, t0);
      }
    }
  }
}

} // namespace

void qmm_legacy_avx512(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::f32: return run<ggml_type::f32>(j);
    case ggml_type::f16: return run<ggml_type::f16>(j);
    case ggml_type::bf16: return run<ggml_type::bf16>(j);
    default: return qmm_legacy_avx512_quant(j);
  }
}

} // namespace conveyor::model

#endif
