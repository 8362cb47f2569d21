// AVX-512 VNNI K-quant qmm (512-bit vpdpbusd). Same tiles, float step and batch invariance as
// qmm_k_avx2.cpp (one weight row x <= 8 tokens; exact int32 sums per (row, token, block), then
// kq_step() lane-wise), so it equals qmm_kquant_scalar bit for bit.
// NOTE: dpbusd adds four u8*s8 products into each int32 lane, so a lane must never mix
// sub-blocks of different scales. Each weight block is therefore permuted in registers (one
// vpermt2d per 64 bytes) so that lane p always holds the same sub-block(s), and the activations
// are repacked once per call into the matching order:
//   Q4_K/Q5_K: 4 vectors (k = 0, 1; nibble h = lo, hi); lane p = 4 elements of sub-block
//              2(p%4)+h, chunk 4k + p/4. Lo and hi lanes are packed to int16 (|sum| <= 8*31*127)
//              and madd'ed with the scales [sc0 sc2 sc4 sc6 sc1 sc3 sc5 sc7] per 128 bits.
//   Q6_K:      4 vectors; lane p = 4 elements of sub-block p (16 sub-blocks of 16, one scale
//              each); the accumulator starts at -32 * bsums[p] (q is stored +32), times scale.
#if defined(__x86_64__) || defined(__i386__)

// NOTE: GCC 12's AVX-512 headers self-initialise their "undefined" vectors (`__m512i __Y = __Y;`,
// GCC PR105593), which -Wmaybe-uninitialized reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <vector>

#include "model/cpu/qmm_k_common.hpp"
#include "model/cpu/qmm_kernels.hpp"

#define CV_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace conveyor::model {
namespace {

/// Lane constants of the permutations above.
struct lane_tables {
  alignas(64) int32_t q4[2][16], q5h[2][16], q5sh[16], q6l[4][16], q6h[4][16], q6shl[16], q6shh[16];
};
constexpr lane_tables make_tables() {
  lane_tables t{};
  for (int p = 0; p < 16; ++p) {
    const int n = p / 8, u = (p % 8) / 2;
    for (int k = 0; k < 2; ++k) {
      t.q4[k][p] = 8 * (p % 4) + 4 * k + p / 4;
      t.q5h[k][p] = 4 * k + p / 4;
    }
    t.q5sh[p] = 2 * (p % 4);
    for (int k = 0; k < 4; ++k) {
      t.q6l[k][p] = 16 * n + 8 * (u & 1) + 4 * (p & 1) + k;
      t.q6h[k][p] = 8 * n + 4 * (p & 1) + k;
    }
    t.q6shl[p] = 4 * (u >> 1);
    t.q6shh[p] = 2 * u;
  }
  return t;
}
constexpr lane_tables kLanes = make_tables();

/// Repacked activation bytes per (token, block): 256 quants (+ 16 int32 of -32 * bsums, Q6_K).
template <ggml_type T> constexpr size_t rep_bytes() { return T == ggml_type::q6_k ? 320 : 256; }

/// Repacks token `a`'s block into the lane order above.
template <ggml_type T> void repack(const uint8_t* a, uint8_t* out) {
  const uint8_t* qs = a + kq::q8k_qs;
  if constexpr (T == ggml_type::q6_k) {
    for (int k = 0; k < 4; ++k)
      for (int p = 0; p < 16; ++p) std::memcpy(out + 64 * k + 4 * p, qs + 4 * (4 * p + k), 4);
    for (int p = 0; p < 16; ++p) {
      const int32_t v = -32 * kq::load_i16(a + kq::q8k_bsums + 2 * p);
      std::memcpy(out + 256 + 4 * p, &v, 4);
    }
  } else {
    for (int k = 0; k < 2; ++k)
      for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 16; ++p)
          std::memcpy(out + 64 * (2 * k + h) + 4 * p, qs + 4 * (8 * (2 * (p % 4) + h) + 4 * k + p / 4), 4);
  }
}

CV_AVX512 inline __m512i ld64(const void* p) { return _mm512_loadu_si512(p); }
CV_AVX512 inline __m512i tab(const int32_t* p) { return _mm512_load_si512(p); }
CV_AVX512 inline float f16(const uint8_t* p) { return _cvtsh_ss(static_cast<unsigned short>(kq::load_i16(p))); }

struct zblock {
  __m512i w[4], sc;
  __m256i mins;  // Q4_K/Q5_K: the 8 mins as int16, in both 128-bit lanes
  float d, dmin;
};

template <ggml_type T> CV_AVX512 inline void unpack(const uint8_t* blk, zblock& u) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if constexpr (T == ggml_type::q6_k) {
    const __m512i l0 = ld64(blk), l1 = ld64(blk + 64), h = ld64(blk + 128), m30 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutex2var_epi32(l0, tab(kLanes.q6l[k]), l1), tab(kLanes.q6shl)), m4);
      const __m512i hi = _mm512_slli_epi32(_mm512_srlv_epi32(_mm512_permutexvar_epi32(tab(kLanes.q6h[k]), h), tab(kLanes.q6shh)), 4);
      u.w[k] = _mm512_ternarylogic_epi32(lo, hi, m30, 0xF8);  // lo | (hi & 0x30)
    }
    u.sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
    u.d = f16(blk + 208);
  } else {
    constexpr bool five = T == ggml_type::q5_k;
    const uint8_t* qs = blk + (five ? 48 : 16);
    const __m512i q0 = ld64(qs), q1 = ld64(qs + 64), b4 = _mm512_set1_epi8(0x10);
    const __m512i qh = five ? _mm512_maskz_loadu_epi32(0x00FF, blk + 16) : _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      const __m512i z = _mm512_permutex2var_epi32(q0, tab(kLanes.q4[k]), q1);
      __m512i lo = _mm512_and_si512(z, m4), hi = _mm512_and_si512(_mm512_srli_epi32(z, 4), m4);
      if constexpr (five) {
        const __m512i hs = _mm512_srlv_epi32(_mm512_permutexvar_epi32(tab(kLanes.q5h[k]), qh), tab(kLanes.q5sh));
        lo = _mm512_ternarylogic_epi32(lo, _mm512_slli_epi32(hs, 4), b4, 0xF8);
        hi = _mm512_ternarylogic_epi32(hi, _mm512_slli_epi32(hs, 3), b4, 0xF8);
      }
      u.w[2 * k] = lo;
      u.w[2 * k + 1] = hi;
    }
    uint64_t sc, mn;
    kq::unpack_scales(blk + 4, &sc, &mn);
    const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128i s16 = _mm_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<long long>(sc)), order));
    u.sc = _mm512_broadcast_i32x4(s16);
    u.mins = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mn))));
    u.d = f16(blk);
    u.dmin = f16(blk + 2);
  }
}

/// sc-weighted integer dot of one block with one repacked token, folded to 8 int32 lanes.
template <ggml_type T> CV_AVX512 inline __m256i pair(const zblock& u, const uint8_t* a) {
  __m512i p;
  if constexpr (T == ggml_type::q6_k) {
    __m512i acc = ld64(a + 256);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) acc = _mm512_dpbusd_epi32(acc, u.w[k], ld64(a + 64 * k));
    p = _mm512_mullo_epi32(acc, u.sc);
  } else {
    const __m512i z = _mm512_setzero_si512();
    const __m512i lo = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, u.w[0], ld64(a)), u.w[2], ld64(a + 128));
    const __m512i hi = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, u.w[1], ld64(a + 64)), u.w[3], ld64(a + 192));
    p = _mm512_madd_epi16(_mm512_packs_epi32(lo, hi), u.sc);
  }
  return _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
}

/// Lane t = the sum of v[t]'s lanes, t < NT (exact integer sums; the order is free).
template <int NT> CV_AVX512 inline __m256i reduce(const __m256i* v) {
  if constexpr (NT == 1) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v[0]), _mm256_extracti128_si256(v[0], 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    return _mm256_castsi128_si256(_mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1)));
  } else {
    __m256i x[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) x[i] = i < NT ? v[i] : _mm256_setzero_si256();
    const __m256i b0 = _mm256_hadd_epi32(_mm256_hadd_epi32(x[0], x[1]), _mm256_hadd_epi32(x[2], x[3]));
    if constexpr (NT <= 4) {
      return _mm256_castsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(b0), _mm256_extracti128_si256(b0, 1)));
    } else {
      const __m256i b1 = _mm256_hadd_epi32(_mm256_hadd_epi32(x[4], x[5]), _mm256_hadd_epi32(x[6], x[7]));
      return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
    }
  }
}

/// msum lanes (tokens) = sum_j min_j * bs_j(t) from the group's meta.
CV_AVX512 inline __m256i msums(const zblock& u, const uint8_t* mb) {
  const auto* bsp = reinterpret_cast<const __m256i*>(mb + 32);
  const __m256i a = _mm256_madd_epi16(_mm256_loadu_si256(bsp), _mm256_shuffle_epi32(u.mins, 0x00));
  const __m256i b = _mm256_madd_epi16(_mm256_loadu_si256(bsp + 1), _mm256_shuffle_epi32(u.mins, 0x55));
  const __m256i c = _mm256_madd_epi16(_mm256_loadu_si256(bsp + 2), _mm256_shuffle_epi32(u.mins, 0xAA));
  const __m256i d = _mm256_madd_epi16(_mm256_loadu_si256(bsp + 3), _mm256_shuffle_epi32(u.mins, 0xFF));
  return _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d));
}

/// Rows [r0, r1), one at a time, x tokens [t0, t0 + NT); rep = the group's repacked blocks.
template <ggml_type T, int NT>
CV_AVX512 void tile(const qmm_job& j, int32_t r0, int32_t r1, int32_t t0, const uint8_t* meta, const uint8_t* rep) {
  constexpr size_t bb = kq::block_bytes_of(T), rb = rep_bytes<T>();
  const int32_t nb = j.k / 256;
  for (int32_t r = r0; r < r1; ++r) {
    const uint8_t* blk = j.w + static_cast<size_t>(r) * j.w_row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; ++b, blk += bb) {
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes + 128), _MM_HINT_T0);
      const uint8_t* mb = meta + kq::meta_bytes * static_cast<size_t>(b);
      const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(mb));
      const uint8_t* ab = rep + rb * 8 * static_cast<size_t>(b);
      zblock u;
      unpack<T>(blk, u);
      __m256i p[NT];
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) p[t] = pair<T>(u, ab + rb * t);
      acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(u.d), da), _mm256_cvtepi32_ps(reduce<NT>(p)), acc);
      if constexpr (T != ggml_type::q6_k)
        acc = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(u.dmin), da), _mm256_cvtepi32_ps(msums(u, mb)), acc);
    }
    alignas(32) float out[8];
    _mm256_store_ps(out, acc);
    for (int t = 0; t < NT; ++t) {
      float& c = j.c[static_cast<size_t>(t0 + t) * j.ldc + r];
      c = j.accumulate ? c + out[t] : out[t];
    }
  }
}

template <ggml_type T> CV_AVX512 void run(const qmm_job& j) {
  // One token (two for Q4_K/Q5_K): the AVX2 8-row kernel, faster there than these tiles whose
  // per-block permutes are shared by too few tokens (measured; same bits either way).
  if (j.m == 1 || (j.m == 2 && T != ggml_type::q6_k)) return qmm_kquant_avx2_small(j);
  if (j.m >= kq::wide_m && kq::wide_enabled()) return qmm_kquant_avx512_wide(j);
  using tile_fn = void (*)(const qmm_job&, int32_t, int32_t, int32_t, const uint8_t*, const uint8_t*);
  static constexpr tile_fn tiles[8] = {tile<T, 1>, tile<T, 2>, tile<T, 3>, tile<T, 4>,
                                       tile<T, 5>, tile<T, 6>, tile<T, 7>, tile<T, 8>};
  constexpr size_t rb = rep_bytes<T>();
  const int32_t nb = j.k / 256, ng = (j.m + 7) / 8;
  const size_t gmeta = kq::meta_bytes * static_cast<size_t>(nb), grep = rb * 8 * static_cast<size_t>(nb);
  thread_local std::vector<uint8_t> meta, rep;
  meta.resize(gmeta * static_cast<size_t>(ng));
  rep.resize(grep * static_cast<size_t>(ng));
  for (int32_t g = 0; g < ng; ++g) {
    const int32_t nt = std::min(8, j.m - 8 * g);
    kq::build_meta(j.act, j.act_stride, 8 * g, nt, nb, meta.data() + gmeta * g);
    for (int32_t t = 0; t < nt; ++t)
      for (int32_t b = 0; b < nb; ++b)
        repack<T>(j.act + static_cast<size_t>(8 * g + t) * j.act_stride + kq::q8k_bytes * static_cast<size_t>(b),
                  rep.data() + grep * g + rb * (8 * static_cast<size_t>(b) + t));
  }
  for (int32_t rc = 0; rc < j.n_rows; rc += kq::row_chunk)
    for (int32_t g = 0; g < ng; ++g)
      tiles[std::min(8, j.m - 8 * g) - 1](j, rc, std::min(j.n_rows, rc + kq::row_chunk), 8 * g, meta.data() + gmeta * g,
                                          rep.data() + grep * g);
}

} // namespace

CV_AVX512 void qmm_kquant_avx512(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_k: return run<ggml_type::q4_k>(j);
    case ggml_type::q5_k: return run<ggml_type::q5_k>(j);
    case ggml_type::q6_k: return run<ggml_type::q6_k>(j);
    default: return;
  }
}

} // namespace conveyor::model

#endif // x86
