// AVX-VNNI legacy qmm kernel for the quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0: hosts with AVX2
// and the VEX-encoded 256-bit vpdpbusd but no AVX-512 (Alder Lake and later client cores, the
// E-core Xeons: Sierra Forest and later). The tile of qmm_avx2_q.cpp (qmm_avx2_q_tile.hpp: rows
// in lanes, two 8-row halves per 16-row group) with a block's integer dot as 8 vpdpbusd into
// int32 (u8 weights x the token's 4 activation bytes broadcast), as the AVX-512 kernel does on
// 16 lanes: about half the instructions of AVX2's maddubs + add16 + madd. Q8_0 is read as w + 128
// with the -128 * sum(a) corrections. The F32 / F16 / BF16 types and the K-quants run the AVX2
// kernels (qmm.cpp's dispatch).
//
// NOTE: batch invariance. The integer sums are exact (as AVX2's), the float steps the same lane
// by lane: the scalar kernel's bits.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "model/cpu/qmm_kernels.hpp"
#include "model/cpu/qmm_rl.hpp"

#define CV_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace conveyor::model {

namespace {

using namespace qmmrl;

constexpr int kPass = 4;          // tokens per tile
constexpr bool kQ8Offset = true;  // vpdpbusd takes u8 weights

/// The exact int32 dots of the 8 lanes' block with the token's 8 activation dwords qb, plus c:
/// two chains of 4 (vpdpbusd's latency), every type alike.
template <ggml_type T> CV_AVXVNNI inline __m256i idot(const __m256i (&w)[8], const int32_t* qb, __m256i c) {
  __m256i s0 = c, s1 = _mm256_setzero_si256();
  #pragma GCC unroll 8
  for (int i = 0; i < 8; i += 2) {
    s0 = _mm256_dpbusd_avx_epi32(s0, w[i], _mm256_set1_epi32(qb[i]));
    s1 = _mm256_dpbusd_avx_epi32(s1, w[i + 1], _mm256_set1_epi32(qb[i + 1]));
  }
  return _mm256_add_epi32(s0, s1);
}

#define QMM_TARGET CV_AVXVNNI
#include "model/cpu/qmm_avx2_q_tile.hpp"  // decode, tile, run, run_quant
#undef QMM_TARGET

} // namespace

void qmm_legacy_avxvnni_quant(const qmm_job& j) { run_quant(j); }

} // namespace conveyor::model

#endif
