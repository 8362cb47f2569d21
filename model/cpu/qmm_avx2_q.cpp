// AVX2 legacy qmm kernel for the quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (called from
// qmm_avx2.cpp), in the AVX-512 kernel's "block per lane" form (qmm_avx2_q_pack.hpp): a group of
// up to 8 blocks is G maddubs + madd into one vector whose lane L is the exact partial dot of
// block L / (8 / G); its float work is one cvt, one mul and one fma for the whole group. Q4
// types add their maddubs results as int16 (|sum| <= 8 * 2 * 15 * 128 < 2^15), Q5 four at a time,
// Q8_0 (sign trick) one at a time, before the madd: exact either way.
//
// Per call: the activations are repacked once (with per-group activation scales and the
// -off * sum(a) corrections of Q4_0 / Q5_0); at m == 1 each row is unpacked in registers (raw or
// packed rows), at m > 1 each row tile is unpacked once into an L1 buffer and run against every
// token in tiles of R rows x N tokens.
//
// NOTE: batch invariance. For a (row, token) pair every path (any R, N, m, row offset, packed or
// raw) does the same float operations in the same order: acc = 0; per group in order,
// acc = fma(cvt(isum), dw * da, acc); then + the min terms; then the same horizontal sum. (These
// are the AVX-512 kernel's operations, so both ISAs give the same bits.)
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "model/cpu/qmm_avx2_q_pack.hpp"
#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {

void qmm_legacy_avx2_quant(const qmm_job& j);  // qmm_avx2.cpp's dispatch

namespace {

using namespace qmm256;

struct ctx {
  const qmm_job* j;
  int32_t nb, r0;     // r0: job row of the tile's first row
  const uint8_t* wb;  // unpacked rows, wstride apart
  size_t wstride;
  const uint8_t* ab;  // repacked tokens, astride apart
  size_t astride;
};

CV_AVX2 inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

CV_AVX2 inline void store(const qmm_job& j, int32_t t, int32_t r, __m256 acc) {
  float& o = j.c[static_cast<size_t>(t) * static_cast<size_t>(j.ldc) + static_cast<size_t>(r)];
  const float h = hsum(acc);
  o = j.accumulate ? o + h : h;
}

/// Lane-wise exact integer dot of G weight vectors w (pointers, 32 bytes apart) and activation
/// vectors at a, plus c.
template <ggml_type T, int G> CV_AVX2 inline __m256i idot(const __m256i* w, const uint8_t* a, __m256i c) {
  constexpr int run = T == ggml_type::q8_0 ? 1 : layout<T>().qh >= 0 ? 4 : 8;  // int16 sums that cannot overflow
  const __m256i ones = _mm256_set1_epi16(1);
  #pragma GCC unroll 8
  for (int i0 = 0; i0 < G; i0 += run) {
    __m256i s16 = _mm256_setzero_si256();
    for (int i = i0; i < std::min(G, i0 + run); ++i) {
      const __m256i av = ld(a + 32 * i);
      const __m256i p = T == ggml_type::q8_0 ? _mm256_maddubs_epi16(_mm256_sign_epi8(w[i], w[i]), _mm256_sign_epi8(av, w[i]))
                                             : _mm256_maddubs_epi16(w[i], av);
      s16 = i == i0 ? p : _mm256_add_epi16(s16, p);
    }
    c = _mm256_add_epi32(c, _mm256_madd_epi16(s16, ones));
  }
  return c;
}

/// The float step of a group, the same in every path.
template <ggml_type T> CV_AVX2 inline __m256 fold(__m256 acc, __m256i is, __m256 dw, __m256 da, __m256 mv, __m256 sa) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, da), acc);
  if constexpr (has_min<T>()) acc = _mm256_fmadd_ps(mv, sa, acc);
  return acc;
}

/// Activation scales (and sums) of a group: da at +32G(+32), sa after it.
template <ggml_type T, int G> CV_AVX2 inline void act_scales(const uint8_t* pa, __m256& da, __m256& sa, __m256i& c) {
  constexpr int ad = 32 * G + (has_corr<T>() ? 32 : 0);
  c = has_corr<T>() ? ld(pa + 32 * G) : _mm256_setzero_si256();
  da = _mm256_loadu_ps(reinterpret_cast<const float*>(pa + ad));
  sa = has_min<T>() ? _mm256_loadu_ps(reinterpret_cast<const float*>(pa + ad + 32)) : _mm256_setzero_ps();
}

/// One group of an R x N tile from the unpacked buffer.
template <ggml_type T, int R, int N, int G>
CV_AVX2 inline void group(const uint8_t* (&pw)[R], const uint8_t* (&pa)[N], __m256 (&acc)[R][N]) {
  __m256 da[N], sa[N];
  __m256i c[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) act_scales<T, G>(pa[t], da[t], sa[t], c[t]);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __m256i w[G];
    #pragma GCC unroll 8
    for (int i = 0; i < G; ++i) w[i] = ld(pw[r] + 32 * i);
    const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(pw[r] + 32 * G));
    const __m256 mv = has_min<T>() ? _mm256_loadu_ps(reinterpret_cast<const float*>(pw[r] + 32 * G + 32)) : _mm256_setzero_ps();
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) acc[r][t] = fold<T>(acc[r][t], idot<T, G>(w, pa[t], c[t]), dw, da[t], mv, sa[t]);
    pw[r] += w_group_bytes<T>(G);
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) pa[t] += act_group_bytes<T>(G);
}

template <ggml_type T, int R, int N> CV_AVX2 void tile(const ctx& c, int32_t t0) {
  const uint8_t* pw[R];
  const uint8_t* pa[N];
  for (int r = 0; r < R; ++r) pw[r] = c.wb + static_cast<size_t>(r) * c.wstride;
  for (int t = 0; t < N; ++t) pa[t] = c.ab + static_cast<size_t>(t0 + t) * c.astride;
  __m256 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int32_t b = 0; b + 8 <= c.nb; b += 8) group<T, R, N, 8>(pw, pa, acc);
  if (c.nb & 4) group<T, R, N, 4>(pw, pa, acc);
  if (c.nb & 2) group<T, R, N, 2>(pw, pa, acc);
  if (c.nb & 1) group<T, R, N, 1>(pw, pa, acc);
  for (int t = 0; t < N; ++t)
    for (int r = 0; r < R; ++r) store(*c.j, t0 + t, c.r0 + r, acc[r][t]);
}

/// One group of the m == 1 path: rows unpacked in registers (packed rows when P).
template <ggml_type T, bool P, int R, int G>
CV_AVX2 inline void group1(const uint8_t* (&pw)[R], const uint8_t*& pa, __m256 (&acc)[R], size_t pf) {
  __m256 da, sa;
  __m256i c;
  act_scales<T, G>(pa, da, sa, c);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    for (int l = 0; l < G * layout<T>().bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(pw[r] + pf + l), _MM_HINT_T0);
    __m256i v[G];
    __m256 dw, mv = _mm256_setzero_ps();
    if constexpr (P) load_packed<T, G>(pw[r], v, dw, mv);
    else load_wgroup<T, G>(pw[r], v, dw, mv);
    pw[r] += static_cast<size_t>(G) * layout<T>().bytes;
    acc[r] = fold<T>(acc[r], idot<T, G>(v, pa, c), dw, da, mv, sa);
  }
  pa += act_group_bytes<T>(G);
}

template <ggml_type T, bool P, int R> CV_AVX2 void tile1(const ctx& c, int32_t) {
  const qmm_job& j = *c.j;
  const uint8_t* pw[R];
  const uint8_t* pa = c.ab;
  for (int r = 0; r < R; ++r) pw[r] = j.w + static_cast<size_t>(c.r0 + r) * j.w_row_bytes;
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const size_t pf = static_cast<size_t>(kPrefetchRows) * j.w_row_bytes;
  for (int32_t b = 0; b + 8 <= c.nb; b += 8) group1<T, P, R, 8>(pw, pa, acc, pf);
  if (c.nb & 4) group1<T, P, R, 4>(pw, pa, acc, pf);
  if (c.nb & 2) group1<T, P, R, 2>(pw, pa, acc, pf);
  if (c.nb & 1) group1<T, P, R, 1>(pw, pa, acc, pf);
  for (int r = 0; r < R; ++r) store(j, 0, c.r0 + r, acc[r]);
}

/// Repacks the group of G activation blocks (qs at q, scales at d, sums at s) into out.
template <ggml_type T, int G> CV_AVX2 inline void repack_group(const uint8_t* q, const float* d, const float* s, uint8_t* out) {
  __m256i v[G];
  gather32<G>(q, 32, v);
  __m256i corr = _mm256_setzero_si256();
  for (int i = 0; i < G; ++i) {
    st(out + 32 * i, v[i]);
    if constexpr (has_corr<T>())
      corr = _mm256_add_epi32(corr, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(layout<T>().off)), v[i]),
                                                      _mm256_set1_epi16(1)));
  }
  uint8_t* o = out + 32 * G;
  if constexpr (has_corr<T>()) {
    st(o, _mm256_sub_epi32(_mm256_setzero_si256(), corr));
    o += 32;
  }
  const __m256i used = first_lanes(G);
  _mm256_storeu_ps(reinterpret_cast<float*>(o), _mm256_permutevar8x32_ps(_mm256_maskload_ps(d, used), lane_block<G>()));
  if constexpr (has_min<T>())
    _mm256_storeu_ps(reinterpret_cast<float*>(o + 32), _mm256_permutevar8x32_ps(_mm256_maskload_ps(s, used), lane_block<G>()));
}

template <ggml_type T> CV_AVX2 void repack_row(const uint8_t* a, int32_t nb, uint8_t* out) {
  const float* d = reinterpret_cast<const float*>(a + 32 * static_cast<size_t>(nb));
  const float* s = d + nb;  // q8_1 sums (read only for Q4_1 / Q5_1)
  int32_t b = 0;
  for (; b + 8 <= nb; b += 8, out += act_group_bytes<T>(8)) repack_group<T, 8>(a + 32 * b, d + b, s + b, out);
  if (nb & 4) { repack_group<T, 4>(a + 32 * b, d + b, s + b, out); b += 4; out += act_group_bytes<T>(4); }
  if (nb & 2) { repack_group<T, 2>(a + 32 * b, d + b, s + b, out); b += 2; out += act_group_bytes<T>(2); }
  if (nb & 1) repack_group<T, 1>(a + 32 * b, d + b, s + b, out);
}

/// Unpacks the group of G blocks at p (raw, or packed when P) into out (w_group_bytes).
template <ggml_type T, bool P, int G> CV_AVX2 inline void unpack_group(const uint8_t* p, uint8_t* out) {
  __m256i v[G];
  __m256 dw, mv = _mm256_setzero_ps();
  if constexpr (P) load_packed<T, G>(p, v, dw, mv);
  else load_wgroup<T, G>(p, v, dw, mv);
  for (int i = 0; i < G; ++i) st(out + 32 * i, v[i]);
  _mm256_storeu_ps(reinterpret_cast<float*>(out + 32 * G), dw);
  if constexpr (has_min<T>()) _mm256_storeu_ps(reinterpret_cast<float*>(out + 32 * G + 32), mv);
}

/// Unpacks a row (nb blocks at w) into out, prefetching the row pf bytes ahead as it goes.
template <ggml_type T, bool P> CV_AVX2 void unpack_row(const uint8_t* w, int32_t nb, uint8_t* out, size_t pf) {
  constexpr size_t bs = layout<T>().bytes;
  for (size_t l = 0; l < bs * static_cast<size_t>(nb); l += 64) _mm_prefetch(reinterpret_cast<const char*>(w + pf + l), _MM_HINT_T0);
  int32_t b = 0;
  for (; b + 8 <= nb; b += 8, out += w_group_bytes<T>(8)) unpack_group<T, P, 8>(w + bs * b, out);
  if (nb & 4) { unpack_group<T, P, 4>(w + bs * b, out); b += 4; out += w_group_bytes<T>(4); }
  if (nb & 2) { unpack_group<T, P, 2>(w + bs * b, out); b += 2; out += w_group_bytes<T>(2); }
  if (nb & 1) unpack_group<T, P, 1>(w + bs * b, out);
}

using tile_fn = void (*)(const ctx&, int32_t);

template <ggml_type T, size_t... I> constexpr std::array<tile_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{&tile<T, static_cast<int>(I) / kToks + 1, static_cast<int>(I) % kToks + 1>...}};
}
template <ggml_type T, bool P, size_t... I> constexpr std::array<tile_fn, sizeof...(I)> make_table1(std::index_sequence<I...>) {
  return {{&tile1<T, P, static_cast<int>(I) + 1>...}};
}

CV_AVX2 inline uint8_t* aligned64(std::vector<uint8_t>& v, size_t bytes) {
  if (v.size() < bytes + 64) v.resize(bytes + 64);
  return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
}

template <ggml_type T, bool P> CV_AVX2 void run(const qmm_job& j) {
  static constexpr auto table = make_table<T>(std::make_index_sequence<kRows * kToks>{});
  static constexpr auto table1 = make_table1<T, P>(std::make_index_sequence<kRowsM1>{});
  thread_local std::vector<uint8_t> abuf, wbuf;
  const int32_t nb = j.k / 32;
  const size_t astride = (row_bytes<T, act_group_bytes<T>>(nb) + 63) & ~size_t{63};
  const size_t wstride = (row_bytes<T, w_group_bytes<T>>(nb) + 63) & ~size_t{63};
  uint8_t* ab = aligned64(abuf, astride * j.m);
  for (int32_t t = 0; t < j.m; ++t) repack_row<T>(j.act + static_cast<size_t>(t) * j.act_stride, nb, ab + astride * t);
  ctx c{&j, nb, 0, nullptr, wstride, ab, astride};
  if (j.m == 1) {
    for (int32_t r0 = 0; r0 < j.n_rows; r0 += kRowsM1) {
      c.r0 = r0;
      table1[static_cast<size_t>(std::min(kRowsM1, j.n_rows - r0) - 1)](c, 0);
    }
    return;
  }
  uint8_t* wb = aligned64(wbuf, wstride * kRows);
  const size_t pf = static_cast<size_t>(kPrefetchRows) * j.w_row_bytes;  // short row chunks: see group1
  c.wb = wb;
  for (int32_t tc = 0; tc < j.m; tc += kChunk) {
    const int32_t te = std::min(j.m, tc + kChunk);
    for (int32_t r0 = 0; r0 < j.n_rows; r0 += kRows) {
      const int rn = std::min(kRows, j.n_rows - r0);
      c.r0 = r0;
      for (int i = 0; i < rn; ++i) unpack_row<T, P>(j.w + static_cast<size_t>(r0 + i) * j.w_row_bytes, nb, wb + wstride * i, pf);
      for (int32_t t0 = tc; t0 < te; t0 += kToks) {
        const int tn = std::min(kToks, te - t0);
        table[static_cast<size_t>((rn - 1) * kToks + tn - 1)](c, t0);
      }
    }
  }
}

template <bool P> void dispatch(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_0: return run<ggml_type::q4_0, P>(j);
    case ggml_type::q4_1: return run<ggml_type::q4_1, P>(j);
    case ggml_type::q5_0: return run<ggml_type::q5_0, P>(j);
    case ggml_type::q5_1: return run<ggml_type::q5_1, P>(j);
    case ggml_type::q8_0: return run<ggml_type::q8_0, P>(j);
    default: return;
  }
}

template <ggml_type T> CV_AVX2 void pack_rows(const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst) {
  constexpr size_t bs = layout<T>().bytes;
  const int32_t nb = k / 32;
  const size_t rb = bs * static_cast<size_t>(nb);
  for (int32_t r = 0; r < rows; ++r) {
    const uint8_t* w = src + rb * r;
    uint8_t* out = dst + rb * r;
    int32_t b = 0;
    for (; b + 8 <= nb; b += 8) pack_group<T, 8>(w + bs * b, out + bs * b);
    if (nb & 4) { pack_group<T, 4>(w + bs * b, out + bs * b); b += 4; }
    if (nb & 2) { pack_group<T, 2>(w + bs * b, out + bs * b); b += 2; }
    if (nb & 1) pack_group<T, 1>(w + bs * b, out + bs * b);
  }
}

} // namespace

void qmm_legacy_avx2_quant(const qmm_job& j) { return j.packed ? dispatch<true>(j) : dispatch<false>(j); }

void qmm_legacy_avx2_pack(ggml_type t, const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst) {
  switch (t) {
    case ggml_type::q4_0: return pack_rows<ggml_type::q4_0>(src, rows, k, dst);
    case ggml_type::q4_1: return pack_rows<ggml_type::q4_1>(src, rows, k, dst);
    case ggml_type::q5_0: return pack_rows<ggml_type::q5_0>(src, rows, k, dst);
    case ggml_type::q5_1: return pack_rows<ggml_type::q5_1>(src, rows, k, dst);
    case ggml_type::q8_0: return pack_rows<ggml_type::q8_0>(src, rows, k, dst);
    default: return;
  }
}

} // namespace conveyor::model

#endif
