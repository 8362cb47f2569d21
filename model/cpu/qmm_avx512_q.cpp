// AVX-512 VNNI legacy qmm kernel for the quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (called from
// qmm_avx512.cpp), rows in lanes (qmm_rl.hpp): a 16-row group's block is 8 u8 vectors (lane r =
// 4 weight bytes of row r), so one vpdpbusd with 4 activation bytes broadcast gives 16 rows'
// partial dots, and a block's float step (cvt, mul, fma, [fma]) serves 16 (row, token) pairs.
// One tile function serves every step size: a group's block is decoded once (nibbles split,
// Q5's high bits added, Q8_0 read as w + 128) and run against up to 8 tokens; one token takes
// two groups at a time (two independent fma chains). Longer steps take the group's tokens in
// equal passes of up to 8 while its bytes stay in L1.
//
// Raw rows (not packed) and a packed matrix's short last group are copied into a 16-lane
// scratch group first (qmm_rl.hpp's pack_group / widen_group), then run by the same tile.
//
// NOTE: batch invariance. Every lane takes qmm_rl.hpp's order, whatever m, the pass, the row
// offset or the group: the scalar kernel's bits. The integer sums are exact (vpdpbusd of u8 and
// s8 into int32, plus the -off * sum(a) corrections), so how they are formed does not matter.
#if defined(__x86_64__) || defined(__i386__)

// NOTE: GCC 12's AVX-512 headers self-initialise their "undefined" vectors (GCC PR105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>

#include "model/cpu/qmm_kernels.hpp"
#include "model/cpu/qmm_rl.hpp"

#define CV_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace conveyor::model {

void qmm_legacy_avx512_quant(const qmm_job& j);  // qmm_avx512.cpp's dispatch

namespace {

using namespace qmmrl;

constexpr int kPass = 8;  // tokens per tile

/// Q5: adds 16 to the bytes of v whose high bit is set; qhv lane r = row r's qh, `byte` the qh
/// byte holding this vector's 4 elements' bits, in its high nibble when `odd`.
template <int byte, bool odd> CV_AVX512 inline __m512i add_high(__m512i v, __m512i qhv) {
  constexpr char b = byte;
  const __m512i idx = _mm512_set4_epi32(0x01010101 * (12 + b), 0x01010101 * (8 + b), 0x01010101 * (4 + b), 0x01010101 * b);
  const __m512i bc = _mm512_shuffle_epi8(qhv, idx);
  const __mmask64 mk = _mm512_test_epi8_mask(bc, _mm512_set1_epi32(odd ? static_cast<int>(0x80402010u) : 0x08040201));
  return _mm512_mask_add_epi8(v, mk, v, _mm512_set1_epi8(0x10));
}

/// acc + the dots of w's 16 dwords with the dword at p broadcast: the broadcast folded into
/// vpdpbusd's memory operand (compilers emit a separate vpbroadcastd for set1, one more uop a
/// dword).
CV_AVX512 inline __m512i dpbusd_bcst(__m512i acc, __m512i w, const int32_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*p));
  return acc;
}

/// Block p of a 16-lane group: the 8 u8 weight vectors (vector i pairs with activation dword i),
/// the scales and (Q4_1 / Q5_1) the mins.
template <ggml_type T> CV_AVX512 inline void decode(const uint8_t* p, __m512i (&w)[8], __m512& dw, __m512& mw) {
  constexpr geom g = geom_of(T);
  if constexpr (T == ggml_type::q8_0) {
    #pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) w[i] = _mm512_xor_si512(_mm512_loadu_si512(p + 64 * i), _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i v = _mm512_loadu_si512(p + 64 * i);
      w[i] = _mm512_and_si512(v, nib);
      w[4 + i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
    }
    if constexpr (g.qh) {
      const __m512i qhv = _mm512_loadu_si512(p + qh_at(g, kLanes));
      w[0] = add_high<0, false>(w[0], qhv);
      w[1] = add_high<0, true>(w[1], qhv);
      w[2] = add_high<1, false>(w[2], qhv);
      w[3] = add_high<1, true>(w[3], qhv);
      w[4] = add_high<2, false>(w[4], qhv);
      w[5] = add_high<2, true>(w[5], qhv);
      w[6] = add_high<3, false>(w[6], qhv);
      w[7] = add_high<3, true>(w[7], qhv);
    }
  }
  dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + d_at(g, kLanes))));
  if constexpr (g.min) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + m_at(g, kLanes))));
}

/// The kAhead'th block ahead in the group's stream (past the group's end: the next group's, the
/// next bytes of the packed matrix), every cache line of it: a job's row chunk is a few groups,
/// too short a stream for the hardware prefetcher to reach DRAM's latency on its own.
/// NOTE: near the matrix's end it prefetches past it (harmless: a prefetch never faults).
constexpr int kAhead = 16;
CV_AVX512 inline void prefetch_block(const uint8_t* p, size_t blk) {
  for (size_t o = 0; o < blk; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

/// NG 16-lane groups (gbytes apart, from w) x N tokens.
template <ggml_type T, int NG, int N> CV_AVX512 void tile(const uint8_t* w, size_t gbytes, const tile_io& io) {
  constexpr geom g = geom_of(T);
  constexpr bool corr = T == ggml_type::q8_0 || g.off != 0;
  constexpr size_t blk = static_cast<size_t>(kLanes) * g.bytes;
  const int32_t nb = io.nb;
  const int32_t* q[N];
  const float* da[N];
  const int32_t* cr[N];
  __m512 acc[NG][N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    const uint8_t* row = io.act + io.astride * static_cast<size_t>(t);
    q[t] = reinterpret_cast<const int32_t*>(row);
    da[t] = reinterpret_cast<const float*>(row + 32 * static_cast<size_t>(nb));
    cr[t] = corr ? io.corr + static_cast<size_t>(nb) * t : nullptr;
    #pragma GCC unroll 2
    for (int x = 0; x < NG; ++x) acc[x][t] = _mm512_setzero_ps();
  }
  for (int32_t b = 0; b < nb; ++b) {
    __m512i wv[NG][8];
    __m512 dw[NG], mw[NG];
    #pragma GCC unroll 2
    for (int x = 0; x < NG; ++x) {
      const uint8_t* p = w + gbytes * x + blk * static_cast<size_t>(b);
      prefetch_block(p + kAhead * blk, blk);
      decode<T>(p, wv[x], dw[x], mw[x]);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const int32_t* qb = q[t] + 8 * b;
      const __m512 d = _mm512_set1_ps(da[t][b]);
      #pragma GCC unroll 2
      for (int x = 0; x < NG; ++x) {
        __m512i s0 = corr ? _mm512_set1_epi32(cr[t][b]) : _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        s0 = dpbusd_bcst(s0, wv[x][0], qb + 0);
        s1 = dpbusd_bcst(s1, wv[x][1], qb + 1);
        s0 = dpbusd_bcst(s0, wv[x][2], qb + 2);
        s1 = dpbusd_bcst(s1, wv[x][3], qb + 3);
        s0 = dpbusd_bcst(s0, wv[x][4], qb + 4);
        s1 = dpbusd_bcst(s1, wv[x][5], qb + 5);
        s0 = dpbusd_bcst(s0, wv[x][6], qb + 6);
        s1 = dpbusd_bcst(s1, wv[x][7], qb + 7);
        const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
        acc[x][t] = _mm512_fmadd_ps(f, _mm512_mul_ps(dw[x], d), acc[x][t]);
        if constexpr (g.min) acc[x][t] = _mm512_fmadd_ps(mw[x], _mm512_set1_ps(da[t][nb + b]), acc[x][t]);
      }
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t)
    #pragma GCC unroll 2
    for (int x = 0; x < NG; ++x) {
      float* o = io.c + static_cast<size_t>(io.ldc) * t + kLanes * x;
      _mm512_storeu_ps(o, io.accumulate ? _mm512_add_ps(_mm512_loadu_ps(o), acc[x][t]) : acc[x][t]);
    }
}

template <ggml_type T, size_t... I> constexpr std::array<tile_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{&tile<T, 1, static_cast<int>(I) + 1>...}};
}

template <ggml_type T> void run(const qmm_job& j) {
  static constexpr auto table = make_table<T>(std::make_index_sequence<kPass>{});
  run_groups(j, T == ggml_type::q8_0 ? 128 : geom_of(T).off, kPass, table.data(), j.packed ? &tile<T, 2, 1> : nullptr);
}

} // namespace

void qmm_legacy_avx512_quant(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_0: return run<ggml_type::q4_0>(j);
    case ggml_type::q4_1: return run<ggml_type::q4_1>(j);
    case ggml_type::q5_0: return run<ggml_type::q5_0>(j);
    case ggml_type::q5_1: return run<ggml_type::q5_1>(j);
    case ggml_type::q8_0: return run<ggml_type::q8_0>(j);
    default: return;
  }
}

} // namespace conveyor::model

#endif
