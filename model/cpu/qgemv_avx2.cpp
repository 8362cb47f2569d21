// AVX2/FMA/F16C qgemv row kernel. Each 32-element block becomes four __m256 of weights computed
// as dequantize_row() does (q*d + m and (q-8)*d are exact products of an fp16 scale and a small
// integer, so FMA or not, every weight equals the f32 matrix's bit for bit), then FMAs into
// per-token accumulators. Compiled with target attributes: callers check the CPU first.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "model/cpu/qgemv_kernels.hpp"

#define CV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace conveyor::model {
namespace {

/// fp16 at p as f32 (F16C: exact for every finite value, as fp16_to_fp32()).
CV_AVX2 inline __m256 half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _mm256_set1_ps(_cvtsh_ss(h));
}

/// Low 8 bytes of v as 8 floats, unsigned / signed.
CV_AVX2 inline __m256 u8_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }
CV_AVX2 inline __m256 i8_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
CV_AVX2 inline __m128i high8(__m128i v) { return _mm_unpackhi_epi64(v, v); }

/// qs[16] of a 4-bit block: low nibbles are elements 0..15, high nibbles 16..31.
CV_AVX2 inline void nibbles(const uint8_t* qs, __m128i& lo, __m128i& hi) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  lo = _mm_and_si128(q, m4);
  hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
}

/// ORs bit 4 of each element from qh (bit j of qh belongs to element j) into lo / hi.
CV_AVX2 inline void fifth_bits(const uint8_t* qhp, __m128i& lo, __m128i& hi) {
  uint32_t qh;
  std::memcpy(&qh, qhp, sizeof qh);
  const __m128i v = _mm_cvtsi32_si128(static_cast<int>(qh));
  const __m128i sel = _mm_set1_epi64x(0x8040201008040201);
  const __m128i b16 = _mm_set1_epi8(0x10);
  // Byte j of lo takes qh byte j/8 (j < 16); byte j of hi takes qh byte 2 + j/8.
  __m128i bl = _mm_shuffle_epi8(v, _mm_set_epi64x(0x0101010101010101, 0));
  __m128i bh = _mm_shuffle_epi8(v, _mm_set_epi64x(0x0303030303030303, 0x0202020202020202));
  bl = _mm_cmpeq_epi8(_mm_and_si128(bl, sel), sel);
  bh = _mm_cmpeq_epi8(_mm_and_si128(bh, sel), sel);
  lo = _mm_or_si128(lo, _mm_and_si128(bl, b16));
  hi = _mm_or_si128(hi, _mm_and_si128(bh, b16));
}

/// y[0..3] = elements 0-7, 8-15, 16-23, 24-31 of the block at p, as dequantize_row() computes them.
template <ggml_type T> CV_AVX2 inline void dequant(const uint8_t* p, __m256 y[4]);

template <> CV_AVX2 inline void dequant<ggml_type::q4_0>(const uint8_t* p, __m256 y[4]) {
  const __m256 d = half_at(p);
  __m128i lo, hi;
  nibbles(p + 2, lo, hi);
  const __m128i eight = _mm_set1_epi8(8);
  lo = _mm_sub_epi8(lo, eight);
  hi = _mm_sub_epi8(hi, eight);
  y[0] = _mm256_mul_ps(i8_ps(lo), d);
  y[1] = _mm256_mul_ps(i8_ps(high8(lo)), d);
  y[2] = _mm256_mul_ps(i8_ps(hi), d);
  y[3] = _mm256_mul_ps(i8_ps(high8(hi)), d);
}

template <> CV_AVX2 inline void dequant<ggml_type::q4_1>(const uint8_t* p, __m256 y[4]) {
  const __m256 d = half_at(p), m = half_at(p + 2);
  __m128i lo, hi;
  nibbles(p + 4, lo, hi);
  y[0] = _mm256_fmadd_ps(u8_ps(lo), d, m);
  y[1] = _mm256_fmadd_ps(u8_ps(high8(lo)), d, m);
  y[2] = _mm256_fmadd_ps(u8_ps(hi), d, m);
  y[3] = _mm256_fmadd_ps(u8_ps(high8(hi)), d, m);
}

template <> CV_AVX2 inline void dequant<ggml_type::q5_0>(const uint8_t* p, __m256 y[4]) {
  const __m256 d = half_at(p);
  __m128i lo, hi;
  nibbles(p + 6, lo, hi);
  fifth_bits(p + 2, lo, hi);
  const __m128i sixteen = _mm_set1_epi8(16);
  lo = _mm_sub_epi8(lo, sixteen);
  hi = _mm_sub_epi8(hi, sixteen);
  y[0] = _mm256_mul_ps(i8_ps(lo), d);
  y[1] = _mm256_mul_ps(i8_ps(high8(lo)), d);
  y[2] = _mm256_mul_ps(i8_ps(hi), d);
  y[3] = _mm256_mul_ps(i8_ps(high8(hi)), d);
}

template <> CV_AVX2 inline void dequant<ggml_type::q5_1>(const uint8_t* p, __m256 y[4]) {
  const __m256 d = half_at(p), m = half_at(p + 2);
  __m128i lo, hi;
  nibbles(p + 8, lo, hi);
  fifth_bits(p + 4, lo, hi);
  y[0] = _mm256_fmadd_ps(u8_ps(lo), d, m);
  y[1] = _mm256_fmadd_ps(u8_ps(high8(lo)), d, m);
  y[2] = _mm256_fmadd_ps(u8_ps(hi), d, m);
  y[3] = _mm256_fmadd_ps(u8_ps(high8(hi)), d, m);
}

template <> CV_AVX2 inline void dequant<ggml_type::q8_0>(const uint8_t* p, __m256 y[4]) {
  const __m256 d = half_at(p);
  for (int i = 0; i < 4; ++i)
    y[i] = _mm256_mul_ps(i8_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * i))), d);
}

template <> CV_AVX2 inline void dequant<ggml_type::f16>(const uint8_t* p, __m256 y[4]) {
  for (int i = 0; i < 4; ++i) y[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)));
}

/// Bytes of the 32 elements dequant<T> reads.
template <ggml_type T> constexpr size_t bytes32() {
  switch (T) {
    case ggml_type::q4_0: return 18;
    case ggml_type::q4_1: return 20;
    case ggml_type::q5_0: return 22;
    case ggml_type::q5_1: return 24;
    case ggml_type::q8_0: return 34;
    default: return 64;  // f16: 32 halves
  }
}

CV_AVX2 inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

/// M tokens (1..4) against every row of the run. Each token has A = 2 accumulators (chunk j of
/// a block goes to accumulator j % 2) whatever M, so a token's sum is the same sequence of
/// operations in every group width: batch-invariant.
template <ggml_type T, int M> CV_AVX2 void rows(const qgemv_run& r, const float* a, float* c) {
  constexpr int A = 2;
  constexpr size_t bb = bytes32<T>();
  const int32_t nb = r.k / 32;
  const size_t lda = static_cast<size_t>(r.k);
  for (int32_t i = 0; i < r.n_rows; ++i) {
    const uint8_t* p = r.w + static_cast<size_t>(i) * r.row_bytes;
    __m256 s[M][A];
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t)
      for (int j = 0; j < A; ++j) s[t][j] = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; ++b, p += bb) {
      __m256 w[4];
      dequant<T>(p, w);
      const float* x = a + 32 * b;
#pragma GCC unroll 8
      for (int t = 0; t < M; ++t)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j)
          s[t][j % A] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * lda + 8 * j), w[j], s[t][j % A]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; ++t) {
      __m256 v = s[t][0];
      for (int j = 1; j < A; ++j) v = _mm256_add_ps(v, s[t][j]);
      float& out = c[static_cast<size_t>(t) * r.ldc + i];
      out = r.accumulate ? out + hsum(v) : hsum(v);
    }
  }
}

using rows_fn = void (*)(const qgemv_run&, const float*, float*);

template <ggml_type T> rows_fn pick(int m) {
  switch (m) {
    case 1: return rows<T, 1>;
    case 2: return rows<T, 2>;
    case 3: return rows<T, 3>;
    default: return rows<T, 4>;
  }
}

rows_fn pick(ggml_type t, int m) {
  switch (t) {
    case ggml_type::q4_0: return pick<ggml_type::q4_0>(m);
    case ggml_type::q4_1: return pick<ggml_type::q4_1>(m);
    case ggml_type::q5_0: return pick<ggml_type::q5_0>(m);
    case ggml_type::q5_1: return pick<ggml_type::q5_1>(m);
    case ggml_type::q8_0: return pick<ggml_type::q8_0>(m);
    case ggml_type::f16: return pick<ggml_type::f16>(m);
    default: return nullptr;
  }
}

} // namespace

void qgemv_run_avx2(const qgemv_run& r) {
  // Tokens in groups of <= 4 (8 accumulators and 4 weight vectors in the 16 ymm registers); the
  // run is a few rows, so later groups find its blocks in cache.
  for (int32_t t0 = 0; t0 < r.m; t0 += 4) {
    const int32_t g = std::min<int32_t>(4, r.m - t0);
    pick(r.type, g)(r, r.a + static_cast<size_t>(t0) * r.k, r.c + static_cast<size_t>(t0) * r.ldc);
  }
}

} // namespace conveyor::model

#endif
