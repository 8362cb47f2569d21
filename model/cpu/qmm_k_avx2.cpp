// AVX2 K-quant qmm. A tile is one weight row x <= 8 tokens: each weight block is unpacked
// once to bytes (8 x 32) and 16-bit scale vectors, then reused by every token of the tile with
// maddubs (u8 x s8 -> s16 pairs, no saturation: 2*63*127 < 32767) and madd by the sub-block
// scale. Each (row, token, block) ends as exact int32 sums, reduced across tokens into one
// vector, and kq_step() runs lane-wise (lanes = tokens): the scalar kernel's float operations,
// so the result does not depend on the tile (batch invariance) and equals qmm_kquant_scalar.
// Rows go in chunks of kq::row_chunk (their weights stay in L2 while every token group passes).
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
CV_AVX2 inline float f16(const uint8_t* p) { return _cvtsh_ss(static_cast<unsigned short>(kq::load_i16(p))); }

/// One weight block unpacked: w[i] = elements 32i..32i+31 as bytes, s[i] = their scale(s) as
/// int16 (Q6_K: low lane sub-block 2i, high lane 2i+1), plus what kq_step needs.
struct wblock {
  __m256i w[8], s[8];
  __m256i mins;  // Q4_K/Q5_K: the 8 mins as int16, in both 128-bit lanes
  __m256i sc16;  // Q6_K: the 16 scales as int16
  float d, dmin;
};

template <ggml_type T> CV_AVX2 inline void unpack(const uint8_t* blk, wblock& u) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  if constexpr (T == ggml_type::q6_k) {
    const __m256i m30 = _mm256_set1_epi8(0x30);
    for (int n = 0; n < 2; ++n) {
      const __m256i l0 = ld(blk + 64 * n), l1 = ld(blk + 64 * n + 32), h = ld(blk + 128 + 32 * n);
      u.w[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
      u.w[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
      u.w[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30));
      u.w[4 * n + 3] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
    }
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i scb = _mm256_broadcastsi128_si256(sc8);
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      // int16 lanes = scale << 8 (low byte zeroed by 0x80), then sign-extend with srai.
      const __m256i ctl = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((2 * v + 1) << 8) | 0x80)),
                                           _mm_set1_epi16(static_cast<short>(((2 * v) << 8) | 0x80)));
      u.s[v] = _mm256_srai_epi16(_mm256_shuffle_epi8(scb, ctl), 8);
    }
    u.sc16 = _mm256_cvtepi8_epi16(sc8);
    u.d = f16(blk + 208);
  } else {
    constexpr bool five = T == ggml_type::q5_k;
    const uint8_t* qs = blk + (five ? 48 : 16);
    for (int g = 0; g < 4; ++g) {
      const __m256i q = ld(qs + 32 * g);
      u.w[2 * g] = _mm256_and_si256(q, m4);
      u.w[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
    if constexpr (five) {
      const __m256i qh = ld(blk + 16), b4 = _mm256_set1_epi8(0x10);
      u.w[0] = _mm256_or_si256(u.w[0], _mm256_and_si256(_mm256_slli_epi16(qh, 4), b4));
      u.w[1] = _mm256_or_si256(u.w[1], _mm256_and_si256(_mm256_slli_epi16(qh, 3), b4));
      u.w[2] = _mm256_or_si256(u.w[2], _mm256_and_si256(_mm256_slli_epi16(qh, 2), b4));
      u.w[3] = _mm256_or_si256(u.w[3], _mm256_and_si256(_mm256_slli_epi16(qh, 1), b4));
      u.w[4] = _mm256_or_si256(u.w[4], _mm256_and_si256(qh, b4));
      u.w[5] = _mm256_or_si256(u.w[5], _mm256_and_si256(_mm256_srli_epi16(qh, 1), b4));
      u.w[6] = _mm256_or_si256(u.w[6], _mm256_and_si256(_mm256_srli_epi16(qh, 2), b4));
      u.w[7] = _mm256_or_si256(u.w[7], _mm256_and_si256(_mm256_srli_epi16(qh, 3), b4));
    }
    uint64_t sc, mn;
    kq::unpack_scales(blk + 4, &sc, &mn);
    const __m256i scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) u.s[s] = _mm256_shuffle_epi8(scv, _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * s)));
    u.mins = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mn))));
    u.d = f16(blk);
    u.dmin = f16(blk + 2);
  }
}

/// sum_i s_i * dot(w_i, a_i) (Q6_K: minus 32 * sum_p sc_p * bsums_p) as 8 int32 lanes.
template <ggml_type T> CV_AVX2 inline __m256i pair(const wblock& u, const uint8_t* a) {
  const uint8_t* qs = a + kq::q8k_qs;
  __m256i s0 = _mm256_madd_epi16(_mm256_maddubs_epi16(u.w[0], ld(qs)), u.s[0]);
  __m256i s1 = _mm256_madd_epi16(_mm256_maddubs_epi16(u.w[1], ld(qs + 32)), u.s[1]);
#pragma GCC unroll 8
  for (int i = 2; i < 8; i += 2) {
    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(u.w[i], ld(qs + 32 * i)), u.s[i]));
    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(u.w[i + 1], ld(qs + 32 * i + 32)), u.s[i + 1]));
  }
  __m256i s = _mm256_add_epi32(s0, s1);
  if constexpr (T == ggml_type::q6_k)
    s = _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(ld(a + kq::q8k_bsums), u.sc16), 5));
  return s;
}

/// Lane t = the sum of v[t]'s lanes, t < NT (exact integer sums; the order is free).
template <int NT> CV_AVX2 inline __m256i reduce(const __m256i* v) {
  if constexpr (NT == 1) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v[0]), _mm256_extracti128_si256(v[0], 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
    return _mm256_castsi128_si256(x);
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
CV_AVX2 inline __m256i msums(const wblock& u, const uint8_t* mb) {
  const uint8_t* bsp = mb + 32;
  const __m256i a = _mm256_madd_epi16(ld(bsp), _mm256_shuffle_epi32(u.mins, 0x00));
  const __m256i b = _mm256_madd_epi16(ld(bsp + 32), _mm256_shuffle_epi32(u.mins, 0x55));
  const __m256i c = _mm256_madd_epi16(ld(bsp + 64), _mm256_shuffle_epi32(u.mins, 0xAA));
  const __m256i d = _mm256_madd_epi16(ld(bsp + 96), _mm256_shuffle_epi32(u.mins, 0xFF));
  return _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d));
}

/// Rows [r0, r1), one at a time (a single weight stream prefetches best), x tokens [t0, t0 + NT).
template <ggml_type T, int NT>
CV_AVX2 void tile(const qmm_job& j, int32_t r0, int32_t r1, int32_t t0, const uint8_t* meta) {
  constexpr size_t bb = kq::block_bytes_of(T);
  const int32_t nb = j.k / 256;
  const uint8_t* a0 = j.act + static_cast<size_t>(t0) * j.act_stride;
  for (int32_t r = r0; r < r1; ++r) {
    const uint8_t* blk = j.w + static_cast<size_t>(r) * j.w_row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int32_t b = 0; b < nb; ++b, blk += bb) {
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(blk + kq::prefetch_bytes + 128), _MM_HINT_T0);
      const uint8_t* mb = meta + kq::meta_bytes * static_cast<size_t>(b);
      const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(mb));
      const uint8_t* ab = a0 + kq::q8k_bytes * static_cast<size_t>(b);
      wblock u;
      unpack<T>(blk, u);
      __m256i p[NT];
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) p[t] = pair<T>(u, ab + static_cast<size_t>(t) * j.act_stride);
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

template <ggml_type T> CV_AVX2 void run(const qmm_job& j) {
  if (j.m <= kq::small_m) return qmm_kquant_avx2_small(j);
  if (j.m >= kq::wide_m && kq::wide_enabled()) return qmm_kquant_avx2_wide(j);
  using tile_fn = void (*)(const qmm_job&, int32_t, int32_t, int32_t, const uint8_t*);
  static constexpr tile_fn tiles[8] = {tile<T, 1>, tile<T, 2>, tile<T, 3>, tile<T, 4>,
                                       tile<T, 5>, tile<T, 6>, tile<T, 7>, tile<T, 8>};
  const int32_t nb = j.k / 256, ng = (j.m + 7) / 8;
  const size_t gbytes = kq::meta_bytes * static_cast<size_t>(nb);
  thread_local std::vector<uint8_t> meta;
  meta.resize(gbytes * static_cast<size_t>(ng));
  for (int32_t g = 0; g < ng; ++g) kq::build_meta(j.act, j.act_stride, 8 * g, std::min(8, j.m - 8 * g), nb, meta.data() + gbytes * g);
  for (int32_t rc = 0; rc < j.n_rows; rc += kq::row_chunk)
    for (int32_t g = 0; g < ng; ++g)
      tiles[std::min(8, j.m - 8 * g) - 1](j, rc, std::min(j.n_rows, rc + kq::row_chunk), 8 * g, meta.data() + gbytes * g);
}

} // namespace

CV_AVX2 void qmm_kquant_avx2(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_k: return run<ggml_type::q4_k>(j);
    case ggml_type::q5_k: return run<ggml_type::q5_k>(j);
    case ggml_type::q6_k: return run<ggml_type::q6_k>(j);
    default: return;
  }
}

} // namespace conveyor::model

#endif // x86
