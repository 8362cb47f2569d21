// Activation quantizers of the legacy qmm kernels (qmm_kernels.hpp): one portable implementation,
// so the bytes never depend on the ISA. The rows are private to the kernels; their layout is
//
//   q8_0 row, k = 32*nb:  int8 qs[nb][32] | f32 d[nb]              36*nb bytes
//   q8_1 row:             int8 qs[nb][32] | f32 d[nb] | f32 s[nb]  40*nb bytes
//
// Element i of block b is qs[b][i] * d[b]; s[b] = d[b] * (sum of qs[b]) as one f32 product (the
// Q4_1 / Q5_1 kernels add min * s per block). qs first keeps it at the row's alignment; d and s
// are contiguous so the kernels broadcast and stream them. The floats sit at 4-byte offsets:
// aligned whenever the row is.
//
// Rounding is ggml's x86 one: d = amax / 127, q = x * (1/d) rounded to nearest, ties to even
// (ggml's AVX quantizer; its scalar reference rounds ties away), clamped to [-127, 127].
// A zero block gets d = 0 and q = 0. Non-finite input gives garbage (d = inf or NaN) but no UB:
// the clamp runs before the float-to-int conversion and maps NaN to -127.
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {
namespace {

/// Quantizes the 32 floats at x into qs and d_out; returns the sum of the 32 q. The AVX2 and the
/// portable branch are the same IEEE operations (max/min as maxps/minps treat NaN, nearest-even
/// conversion), so the bytes do not depend on the build.
int32_t quantize_block(const float* x, int8_t* qs, float& d_out) {
#if defined(__AVX2__)
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 vmax = _mm256_setzero_ps();
  for (int i = 0; i < 32; i += 8) vmax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), vmax);  // NaN: keeps vmax
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
#else
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) amax = a;  // NaN never compares greater: it is ignored here
  }
#endif
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int32_t sum = 0;
#if defined(__AVX2__)
  const __m256 vid = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), vid);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);  // NaN -> -127 (maxps returns its second operand)
    q[j] = _mm256_cvtps_epi32(v);                 // nearest, ties to even
  }
  const __m256i s16 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
  sum = _mm_cvtsi128_si32(s4);
  const __m256i p16 = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
  __m256i p8 = _mm256_packs_epi16(p16, p16b);  // lanes interleaved: undo with a dword permute
  p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), p8);
#else
  for (int i = 0; i < 32; ++i) {
    float v = x[i] * id;
    v = v > -127.0f ? v : -127.0f;  // NaN -> -127, as maxps
    v = v < 127.0f ? v : 127.0f;
    const auto q = static_cast<int32_t>(std::nearbyint(v));  // default mode: nearest, ties to even
    qs[i] = static_cast<int8_t>(q);
    sum += q;
  }
#endif
  d_out = d;
  return sum;
}

void quantize_row(const float* x, uint8_t* out, int32_t k, bool with_sum) {
  const int32_t nb = k / 32;
  uint8_t* dp = out + 32 * static_cast<size_t>(nb);
  uint8_t* sp = dp + 4 * static_cast<size_t>(nb);
  for (int32_t b = 0; b < nb; ++b) {
    float d = 0.0f;
    const int32_t sum = quantize_block(x + 32 * b, reinterpret_cast<int8_t*>(out + 32 * b), d);
    std::memcpy(dp + 4 * b, &d, sizeof d);
    if (with_sum) {
      const float s = d * static_cast<float>(sum);
      std::memcpy(sp + 4 * b, &s, sizeof s);
    }
  }
}

} // namespace

size_t q8_0_row_bytes(int32_t k) { return 36 * static_cast<size_t>(k / 32); }
size_t q8_1_row_bytes(int32_t k) { return 40 * static_cast<size_t>(k / 32); }

void quantize_q8_0_row(const float* x, uint8_t* out, int32_t k) { quantize_row(x, out, k, false); }
void quantize_q8_1_row(const float* x, uint8_t* out, int32_t k) { quantize_row(x, out, k, true); }

} // namespace conveyor::model
