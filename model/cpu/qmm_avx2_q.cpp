// AVX2 legacy qmm kernel for the quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (called from
// qmm_avx2.cpp): the tile of qmm_avx2_q_tile.hpp (rows in lanes, two 8-row halves per 16-row
// group, up to 4 tokens a pass) with the integer dot of a block as maddubs (u8 weights x the
// token's 4 activation bytes broadcast -> int16 pairs) and one madd to int32: Q4 types add all 8
// of a block's maddubs results as int16 first (|sum| <= 8 * 2 * 15 * 127 < 2^15), Q5 four at a
// time; Q8_0 stays signed (sign trick, |w| <= 128) and is summed one vector at a time. The Q4
// and Q5 types run their own tile (tile_halves, below: both halves at once, one broadcast per
// dword), Q8_0 the shared one. Hosts with AVX-VNNI take qmm_avxvnni_q.cpp instead (one vpdpbusd
// a vector).
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
#include "model/cpu/qmm_avx2_q_tile.hpp"  // decode, tile, run (Q8_0 here), run_quant
#undef QMM_TARGET

/// Q4_0 / Q4_1 / Q5_0 / Q5_1: one 16-lane group (both 8-row halves at once) x N tokens. Each
/// activation dword is broadcast once for both halves (the shared tile, per half), a block's weight
/// vector is decoded per dword (2 of 16 registers), and the int16 sums of the 2N (half, token)
/// pairs stay in registers while the float accumulators spill to L1 (N > 2). On AMD Zen 3, from
/// 4 tokens up, ~1.4x the shared tile for Q4 and ~1.2x for Q5 (docs/benchmarks.md); plain loads
/// in place of the broadcasts (a timing-only experiment) gained only ~5% more. The same integer
/// sums and float steps lane by lane as `tile`: the scalar kernel's bits.
template <ggml_type T, int N> CV_AVX2 void tile_halves(const uint8_t* w, size_t, const tile_io& io) {
  constexpr geom g = geom_of(T);
  constexpr bool corr = g.off != 0;
  constexpr size_t blk = static_cast<size_t>(kLanes) * g.bytes;
  static_assert(T != ggml_type::q8_0, "tile_halves takes the 4- and 5-bit types");
  const int32_t nb = io.nb;
  const int32_t* q[N];
  const float* da[N];
  __m256 acc[2][N];
  #pragma GCC unroll 4
  for (int t = 0; t < N; ++t) {
    const uint8_t* row = io.act + io.astride * static_cast<size_t>(t);
    q[t] = reinterpret_cast<const int32_t*>(row);
    da[t] = reinterpret_cast<const float*>(row + 32 * static_cast<size_t>(nb));
    acc[0][t] = acc[1][t] = _mm256_setzero_ps();
  }
  const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  for (int32_t b = 0; b < nb; ++b) {
    const uint8_t* p = w + blk * static_cast<size_t>(b);
    prefetch_block(p + kAhead * blk, blk);
    // Integer dots: int16 sums of `run` maddubs results (|sum| <= 4 * 2 * 31 * 127 < 2^15 for
    // Q5, 8 * 2 * 15 * 127 for Q4), then madd to int32 after the corrections, as `idot` does.
    constexpr int run = g.qh ? 4 : 8;
    __m256i s[2][N], s32[2][N];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      __m256i wv[2];
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i v = ld(p + 64 * (i & 3) + 32 * h);
        wv[h] = _mm256_and_si256(i < 4 ? v : _mm256_srli_epi16(v, 4), nib);
        if constexpr (g.qh) wv[h] = add_high(wv[h], ld(p + qh_at(g, kLanes) + 32 * h), i / 2, i % 2 == 1);
      }
      #pragma GCC unroll 4
      for (int t = 0; t < N; ++t) {
        const __m256i a = _mm256_set1_epi32(q[t][8 * b + i]);
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i m = _mm256_maddubs_epi16(wv[h], a);
          s[h][t] = i % run == 0 ? m : _mm256_add_epi16(s[h][t], m);
          // Pins the sum in a register here: left free, GCC regroups the 64 adds of a block
          // into a tree and spills every maddubs result to the stack.
          __asm__("" : "+x"(s[h][t]));
        }
      }
      if (i % run == run - 1)
        #pragma GCC unroll 4
        for (int t = 0; t < N; ++t)
          #pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const __m256i c = i >= run ? s32[h][t] : corr ? _mm256_set1_epi32(io.corr[static_cast<size_t>(nb) * t + b])
                                                          : _mm256_setzero_si256();
            s32[h][t] = _mm256_add_epi32(c, _mm256_madd_epi16(s[h][t], ones));
          }
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + d_at(g, kLanes) + 16 * h)));
      __m256 mw = _mm256_setzero_ps();
      if constexpr (g.min) mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + m_at(g, kLanes) + 16 * h)));
      #pragma GCC unroll 4
      for (int t = 0; t < N; ++t) {
        const __m256 f = _mm256_cvtepi32_ps(s32[h][t]);
        acc[h][t] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, _mm256_set1_ps(da[t][b])), acc[h][t]);
        if constexpr (g.min) acc[h][t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(da[t][nb + b]), acc[h][t]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < N; ++t)
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      float* o = io.c + static_cast<size_t>(io.ldc) * t + 8 * h;
      _mm256_storeu_ps(o, io.accumulate ? _mm256_add_ps(_mm256_loadu_ps(o), acc[h][t]) : acc[h][t]);
    }
}

constexpr int kPassHalves = 4;  // tokens per tile_halves

template <ggml_type T, size_t... I> constexpr std::array<tile_fn, sizeof...(I)> make_table_halves(std::index_sequence<I...>) {
  return {{&tile_halves<T, static_cast<int>(I) + 1>...}};
}

template <ggml_type T> void run_halves(const qmm_job& j) {
  static constexpr auto table = make_table_halves<T>(std::make_index_sequence<kPassHalves>{});
  run_groups(j, centre<T>(), kPassHalves, table.data(), nullptr);
}

} // namespace

void qmm_legacy_avx2_quant(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_0: return run_halves<ggml_type::q4_0>(j);
    case ggml_type::q4_1: return run_halves<ggml_type::q4_1>(j);
    case ggml_type::q5_0: return run_halves<ggml_type::q5_0>(j);
    case ggml_type::q5_1: return run_halves<ggml_type::q5_1>(j);
    case ggml_type::q8_0: return run<ggml_type::q8_0>(j);  // the shared tile (qmm_avx2_q_tile.hpp)
    default: return;
  }
}

} // namespace conveyor::model

#endif
