// Q8_K activation rows for the K-quant kernels (portable; the only implementation).
//
// Byte layout, per 256-element block (ggml's block_q8_K, 292 bytes, no padding):
//   [0, 4)      float d        scale: x ~= d * q
//   [4, 260)    int8  qs[256]  q in [-127, 127]
//   [260, 292)  int16 bsums[16] bsums[i] = sum of qs[16i .. 16i+15]
// A row of k elements is k/256 such blocks back to back; nothing is aligned.
//
// Rounding follows ggml's quantize_row_q8_K_ref: the element of largest magnitude (first one on
// ties) becomes -127 (iscale = -127/max, d = 1/iscale), the others round to nearest, ties to
// even. A block of zeros gets d = 0 and q = 0. inf/NaN inputs do not crash: NaN elements become
// 0 and every q is clamped to [-127, 127] (the block's d is then inf/NaN or 0, garbage in,
// garbage out). Pure C++ and no contractible expression, so the bytes are the same everywhere.
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "model/cpu/qmm_k_common.hpp"
#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {

size_t q8_k_row_bytes(int32_t k) { return static_cast<size_t>(k / 256) * kq::q8k_bytes; }

void quantize_q8_k_row(const float* x, uint8_t* out, int32_t k) {
  for (int32_t b = 0; b < k / 256; ++b, x += 256, out += kq::q8k_bytes) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    int8_t qs[256];
    int16_t bsums[16];
    float d = 0.0f;
    if (amax == 0.0f) {
      std::memset(qs, 0, sizeof qs);
    } else {
      const float iscale = -127.0f / max;
#if defined(__AVX2__)
      // The same IEEE operations as the portable loop: product, NaN -> 0, clamp, nearest-even.
      const __m256 vs = _mm256_set1_ps(iscale), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
      for (int j = 0; j < 256; j += 32) {
        __m256i q[4];
        for (int u = 0; u < 4; ++u) {
          __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * u));
          v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
          q[u] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
        }
        __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + j), p8);
      }
#else
      for (int j = 0; j < 256; ++j) {
        float v = iscale * x[j];
        if (v != v) v = 0.0f;
        v = v > -127.0f ? v : -127.0f;
        v = v < 127.0f ? v : 127.0f;
        qs[j] = static_cast<int8_t>(std::nearbyint(v));  // default rounding mode: nearest, ties to even
      }
#endif
      d = 1.0f / iscale;
    }
    for (int i = 0; i < 16; ++i) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += qs[16 * i + j];
      bsums[i] = static_cast<int16_t>(s);
    }
    std::memcpy(out, &d, sizeof d);
    std::memcpy(out + kq::q8k_qs, qs, sizeof qs);
    std::memcpy(out + kq::q8k_bsums, bsums, sizeof bsums);
  }
}

} // namespace conveyor::model
