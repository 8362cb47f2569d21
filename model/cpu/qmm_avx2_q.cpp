// AVX2 legacy qmm kernel for the quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (called from
// qmm_avx2.cpp): the tile of qmm_avx2_q_tile.hpp (rows in lanes, two 8-row halves per 16-row
// group, up to 4 tokens a pass) with the integer dot of a block as maddubs (u8 weights x the
// token's 4 activation bytes broadcast -> int16 pairs) and one madd to int32: Q4 types add all 8
// of a block's maddubs results as int16 first (|sum| <= 8 * 2 * 15 * 127 < 2^15), Q5 four at a
// time; Q8_0 stays signed (sign trick, |w| <= 128) and is summed one vector at a time. Hosts with
// AVX-VNNI take qmm_avxvnni_q.cpp instead (one vpdpbusd a vector).
//
// NOTE: batch invariance. Every lane takes qmm_rl.hpp's order whatever m, the pass, the half or
// the row offset: the scalar kernel's bits, and so the AVX-512 kernel's.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "model/cpu/qmm_kernels.hpp"
#include "model/cpu/qmm_rl.hpp"

#define CV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace conveyor::model {

void qmm_legacy_avx2_quant(const qmm_job& j);  // qmm_avx2.cpp's dispatch

namespace {

using namespace qmmrl;

constexpr int kPass = 4;  // tokens per tile
constexpr bool kQ8Offset = false;  // Q8_0 stays signed (the sign trick)

/// The exact int32 dots of the 8 lanes' block with the token's 8 activation dwords qb, plus c.
template <ggml_type T> CV_AVX2 inline __m256i idot(const __m256i (&w)[8], const int32_t* qb, __m256i c) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (T == ggml_type::q8_0) {
    __m256i s0 = c, s1 = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
      const __m256i a0 = _mm256_set1_epi32(qb[i]), a1 = _mm256_set1_epi32(qb[i + 1]);
      s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w[i], w[i]), _mm256_sign_epi8(a0, w[i])), ones));
      s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w[i + 1], w[i + 1]), _mm256_sign_epi8(a1, w[i + 1])), ones));
    }
    return _mm256_add_epi32(s0, s1);
  } else {
    constexpr int run = geom_of(T).qh ? 4 : 8;  // int16 sums that cannot overflow
    __m256i s = c;
    #pragma GCC unroll 2
    for (int i0 = 0; i0 < 8; i0 += run) {
      __m256i p0 = _mm256_maddubs_epi16(w[i0], _mm256_set1_epi32(qb[i0]));
      __m256i p1 = _mm256_maddubs_epi16(w[i0 + 1], _mm256_set1_epi32(qb[i0 + 1]));
      #pragma GCC unroll 8
      for (int i = i0 + 2; i < i0 + run; i += 2) {
        p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w[i], _mm256_set1_epi32(qb[i])));
        p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w[i + 1], _mm256_set1_epi32(qb[i + 1])));
      }
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones));
    }
    return s;
  }
}

#define QMM_TARGET CV_AVX2
#include "model/cpu/qmm_avx2_q_tile.hpp"  // decode, tile, run, run_quant
#undef QMM_TARGET

} // namespace

void qmm_legacy_avx2_quant(const qmm_job& j) { run_quant(j); }

} // namespace conveyor::model

#endif
