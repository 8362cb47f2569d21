// AVX2 K-quant qmm for small steps (m <= kq::small_m tokens, the decode of a few sequences);
// qmm_kquant_avx512 uses it for m = 1 (and m = 2 of Q4_K/Q5_K). A tile is 8 weight rows x the
// m tokens. Pass 1 reads the rows one after the other (one sequential stream of the weights as
// mapped, no repacked copy) and reduces each (row, token, block) to exact int32 sums: isum
// (maddubs, madd by the sub-block scale) and, for Q4_K/Q5_K, msum (one madd of the 8 mins with
// the token's 8 bsums pairs, built once per call). Pass 2 transposes the 8 rows' sums (hadd) so
// that kq_step() runs lane-wise with lanes = rows, blocks in order: per (row, token) the same
// float operations as qmm_kquant_scalar, hence the same bits whatever the tile, m or row offset
// (batch invariance).
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "model/cpu/qmm_k_common.hpp"
#include "model/cpu/qmm_kernels.hpp"

#define CV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace conveyor::model {
namespace {

CV_AVX2 inline __m256i ld(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline uint32_t ld32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

/// One (row, block) against NT tokens (aq[t] = the token's Q8_K block): p[t] = 8 int32 lanes
/// whose sum is isum; *mn = the 8 mins (Q4_K/Q5_K).
template <ggml_type T, int NT>
CV_AVX2 inline void row_block(const uint8_t* blk, const uint8_t* const* aq, __m256i* p, uint64_t* mn) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) p[t] = _mm256_setzero_si256();
  if constexpr (T == ggml_type::q6_k) {
    const __m256i m30 = _mm256_set1_epi8(0x30);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i scb = _mm256_broadcastsi128_si256(sc8);
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      const __m256i l0 = ld(blk + 64 * n), l1 = ld(blk + 64 * n + 32), h = ld(blk + 128 + 32 * n);
      __m256i w[4];
      w[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
      w[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
      w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30));
      w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const int v = 4 * n + u;  // elements 32v..32v+31: sub-blocks 2v (low lane), 2v+1 (high lane)
        const __m256i ctl = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((2 * v + 1) << 8) | 0x80)),
                                             _mm_set1_epi16(static_cast<short>(((2 * v) << 8) | 0x80)));
        const __m256i s = _mm256_srai_epi16(_mm256_shuffle_epi8(scb, ctl), 8);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t)
          p[t] = _mm256_add_epi32(p[t], _mm256_madd_epi16(_mm256_maddubs_epi16(w[u], ld(aq[t] + 32 * v)), s));
      }
    }
    // q is stored + 32: isum -= 32 * sum_p sc_p * bsums_p (bsums follow the 256 quants).
    const __m256i scn = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8), 5));
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) p[t] = _mm256_add_epi32(p[t], _mm256_madd_epi16(ld(aq[t] + 256), scn));
  } else {
    constexpr bool five = T == ggml_type::q5_k;
    const uint8_t* qs = blk + (five ? 48 : 16);
    uint64_t sc;
    kq::unpack_scales(blk + 4, &sc, mn);
    const __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
    __m256i qh = _mm256_setzero_si256();
    if constexpr (five) qh = ld(blk + 16);
    const __m256i b4 = _mm256_set1_epi8(0x10);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m256i q = ld(qs + 32 * g);
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (five) {
        // bit 2g of qh[l] -> bit 4 of lo, bit 2g+1 -> bit 4 of hi.
        const __m256i hl = g < 2 ? _mm256_slli_epi16(qh, 4 - 2 * g) : _mm256_srli_epi16(qh, 2 * g - 4);
        const __m256i hh = g < 2 ? _mm256_slli_epi16(qh, 3 - 2 * g) : _mm256_srli_epi16(qh, 2 * g - 3);
        lo = _mm256_or_si256(lo, _mm256_and_si256(hl, b4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(hh, b4));
      }
      const __m256i slo = _mm256_shuffle_epi8(scv, _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * (2 * g))));
      const __m256i shi = _mm256_shuffle_epi8(scv, _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * (2 * g + 1))));
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256i x = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ld(aq[t] + 64 * g)), slo);
        const __m256i y = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, ld(aq[t] + 64 * g + 32)), shi);
        p[t] = _mm256_add_epi32(p[t], _mm256_add_epi32(x, y));
      }
    }
  }
}

/// Rows [r0, r0 + nr), nr <= 8, x NT tokens. Pass 1 walks the rows one after the other (one
/// sequential weight stream, as mapped) and keeps per (block, row, token) a vector whose low
/// 4 lanes sum to isum and high 4 lanes to msum, and the rows' d/dmin words; pass 2 transposes
/// 8 rows at a time and runs kq_step() with lanes = rows, blocks in order.
template <ggml_type T, int NT>
CV_AVX2 void rows8(const qmm_job& j, int32_t r0, int32_t nr, const __m128i* bsp, __m256i* v, uint32_t* dmw) {
  constexpr bool has_min = T != ggml_type::q6_k;
  constexpr size_t bb = kq::block_bytes_of(T);
  constexpr size_t doff = T == ggml_type::q6_k ? 206 : 0;  // d in the low (Q4_K/Q5_K) / high (Q6_K) half
  const int32_t nb = j.k / 256;
  const uint8_t* a0 = j.act + kq::q8k_qs;
  for (int32_t i = 0; i < 8; ++i) {
    const uint8_t* blk = j.w + static_cast<size_t>(r0 + std::min(i, nr - 1)) * j.w_row_bytes;
    for (int32_t b = 0; b < nb; ++b, blk += bb) {
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes + 64), _MM_HINT_T0);
      if constexpr (bb > 128) _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes + 128), _MM_HINT_T0);
      const uint8_t* aq[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) aq[t] = a0 + static_cast<size_t>(t) * j.act_stride + static_cast<size_t>(b) * kq::q8k_bytes;
      __m256i p[NT];
      uint64_t mn = 0;
      row_block<T, NT>(blk, aq, p, &mn);
      const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mn)));
      __m256i* vb = v + (static_cast<size_t>(b) * 8 + i) * NT;
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m128i lo = _mm_add_epi32(_mm256_castsi256_si128(p[t]), _mm256_extracti128_si256(p[t], 1));
        const __m128i hi = has_min ? _mm_madd_epi16(mins, bsp[static_cast<size_t>(b) * NT + t]) : _mm_setzero_si128();
        _mm256_storeu_si256(vb + t, _mm256_set_m128i(hi, lo));
      }
      uint32_t dm;
      std::memcpy(&dm, blk + doff, 4);
      dmw[static_cast<size_t>(b) * 8 + i] = dm;
    }
    if (i + 1 == nr) break;
  }
  // Lanes past nr repeat row nr - 1 (never stored).
  for (int32_t i = nr; i < 8; ++i)
    for (int32_t b = 0; b < nb; ++b) {
      for (int t = 0; t < NT; ++t) v[(static_cast<size_t>(b) * 8 + i) * NT + t] = v[(static_cast<size_t>(b) * 8 + nr - 1) * NT + t];
      dmw[static_cast<size_t>(b) * 8 + i] = dmw[static_cast<size_t>(b) * 8 + nr - 1];
    }
  // 8 f16 from 32-bit words: their low (Q4_K/Q5_K d) or high (Q6_K d) halves, then the others.
  const __m256i dsel = T == ggml_type::q6_k
                           ? _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1,
                                              4, 5, 8, 9, 12, 13)
                           : _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3,
                                              6, 7, 10, 11, 14, 15);
  __m256 acc[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int32_t b = 0; b < nb; ++b) {
    const __m256i dm = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dmw + static_cast<size_t>(b) * 8)), dsel), 0xD8);
    const __m256 d8 = _mm256_cvtph_ps(_mm256_castsi256_si128(dm));  // [d of 8 rows | dmin of 8 rows]
    const __m256i* vb = v + static_cast<size_t>(b) * 8 * NT;
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const __m256 da = _mm256_set1_ps(kq::load_f32(a0 - kq::q8k_qs + static_cast<size_t>(t) * j.act_stride +
                                                    static_cast<size_t>(b) * kq::q8k_bytes));
      const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(vb[0 * NT + t], vb[1 * NT + t]),
                                           _mm256_hadd_epi32(vb[2 * NT + t], vb[3 * NT + t]));
      const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(vb[4 * NT + t], vb[5 * NT + t]),
                                           _mm256_hadd_epi32(vb[6 * NT + t], vb[7 * NT + t]));
      const __m256i isum = _mm256_permute2x128_si256(h0, h1, 0x20);  // rows 0..7
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d8, da), _mm256_cvtepi32_ps(isum), acc[t]);
      if constexpr (has_min) {
        const __m256 dmin8 = _mm256_cvtph_ps(_mm256_extracti128_si256(dm, 1));
        const __m256i msum = _mm256_permute2x128_si256(h0, h1, 0x31);
        acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin8, da), _mm256_cvtepi32_ps(msum), acc[t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    float* c = j.c + static_cast<size_t>(t) * j.ldc + r0;
    if (nr == 8) {
      _mm256_storeu_ps(c, j.accumulate ? _mm256_add_ps(_mm256_loadu_ps(c), acc[t]) : acc[t]);
    } else {
      alignas(32) float out[8];
      _mm256_store_ps(out, acc[t]);
      for (int i = 0; i < nr; ++i) c[i] = j.accumulate ? c[i] + out[i] : out[i];
    }
  }
}

template <ggml_type T, int NT> CV_AVX2 void run_nt(const qmm_job& j) {
  const int32_t nb = j.k / 256;
  // Scratch kept per thread (grows, never shrinks): no allocation in the steady state.
  thread_local std::vector<uint8_t> scratch;
  const size_t vbytes = static_cast<size_t>(nb) * 8 * NT * 32, bbytes = static_cast<size_t>(nb) * NT * 16;
  if (scratch.size() < vbytes + bbytes + static_cast<size_t>(nb) * 32 + 32) scratch.resize(vbytes + bbytes + static_cast<size_t>(nb) * 32 + 32);
  uint8_t* base = scratch.data() + (-reinterpret_cast<uintptr_t>(scratch.data()) & 31);
  auto* vbuf = reinterpret_cast<__m256i*>(base);
  auto* bbuf = reinterpret_cast<__m128i*>(base + vbytes);
  auto* dbuf = reinterpret_cast<uint32_t*>(base + vbytes + bbytes);
  if constexpr (T != ggml_type::q6_k)  // the tokens' 8 sub-block sums (bsums pairs) as int16
    for (int32_t b = 0; b < nb; ++b)
      for (int t = 0; t < NT; ++t) {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(
            j.act + static_cast<size_t>(t) * j.act_stride + static_cast<size_t>(b) * kq::q8k_bytes + kq::q8k_bsums));
        const __m128i s2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(
            j.act + static_cast<size_t>(t) * j.act_stride + static_cast<size_t>(b) * kq::q8k_bytes + kq::q8k_bsums + 16));
        bbuf[static_cast<size_t>(b) * NT + t] = _mm_hadd_epi16(s, s2);
      }
  for (int32_t r = 0; r < j.n_rows; r += 8)
    rows8<T, NT>(j, r, std::min(8, j.n_rows - r), bbuf, vbuf, dbuf);
}

template <ggml_type T> CV_AVX2 void run(const qmm_job& j) {
  switch (j.m) {
    case 1: return run_nt<T, 1>(j);
    case 2: return run_nt<T, 2>(j);
    case 3: return run_nt<T, 3>(j);
    default: return run_nt<T, 4>(j);
  }
}

} // namespace

CV_AVX2 void qmm_kquant_avx2_small(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_k: return run<ggml_type::q4_k>(j);
    case ggml_type::q5_k: return run<ggml_type::q5_k>(j);
    case ggml_type::q6_k: return run<ggml_type::q6_k>(j);
    default: return;
  }
}

} // namespace conveyor::model

#endif // x86
