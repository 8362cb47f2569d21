// AVX-512 VNNI legacy qmm kernel for the quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (called from
// qmm_avx512.cpp), in "block per lane" form: blocks are taken in groups of G = 8 (then one group
// each of 4, 2, 1 for the remainder of nb), and inside a group the bytes of weights and
// activations are rearranged alike so that every 32-bit lane of a 256-bit vector holds 4 bytes
// of one block only. A group's integer dots are G vpdpbusd into one vector whose lane L is the
// exact partial dot of block L / (8 / G); its float work is then one cvt, one mul (weight scales
// times activation scales, per lane) and one fma for the whole group instead of per block.
//
// Layout of group element-dwords (4 elements each; dword d holds elements 4d .. 4d+3): vector i
// lane L holds dword d(i, L) of block L / (8 / G) (see d_of). A Q4/Q5 block's 16 qs bytes are
// gathered dword-wise (gather16) and split into low nibbles (dwords 0-3) and high nibbles (4-7);
// Q8_0 weights and the activations take the same gather over their two 16-byte halves.
//
// Per call: the activations are repacked once into this layout (with per-group activation scales
// and the -off * sum(a) corrections of the signed types: Q4_0 / Q5_0 use unsigned q, Q8_0 uses
// w + 128), then each row tile is unpacked once into an L1 buffer (with per-group weight scales)
// and run against every token in tiles of R rows x N tokens.
//
// NOTE: batch invariance. For a (row, token) pair every path (any R, N, m, row offset) does the
// same float operations in the same order: acc = 0; per group in order, acc = fma(cvt(isum),
// dw * da, acc); then + the min terms (Q4_1 / Q5_1); then the same horizontal sum. The integer
// sums are exact, so how they are formed does not matter.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "model/cpu/qmm_avx512_q_pack.hpp"
#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {

void qmm_legacy_avx512_quant(const qmm_job& j);  // qmm_avx512.cpp's dispatch
void qmm_legacy_avx512_small(const qmm_job& j);  // qmm_avx512_q_small.cpp: packed, 2 <= m <= kSmallM

namespace {

using namespace qmm512;

struct ctx {
  const qmm_job* j;
  int32_t nb, r0;            // r0: job row of the block's first row
  const uint8_t* wb;         // unpacked rows, wstride apart
  size_t wstride;
  const uint8_t* ab;         // repacked tokens, astride apart
  size_t astride;
};

/// One group of an R x N tile from the buffers.
template <ggml_type T, int R, int N, int G>
CV_AVX512 inline void group(const uint8_t* (&pw)[R], const uint8_t* (&pa)[N], __m256 (&acc)[R][N]) {
  constexpr bool corr = layout<T>().off != 0;
  constexpr int ad = 32 * G + (corr ? 32 : 0);  // da offset in an activation group
  __m256i is[R][N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    const __m256i c = corr ? ld(pa[t] + 32 * G) : _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) is[r][t] = c;
  }
  #pragma GCC unroll 8
  for (int i = 0; i < G; ++i) {
    __m256i w[R], a[N];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = ld(pw[r] + 32 * i);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) a[t] = ld(pa[t] + 32 * i);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int t = 0; t < N; ++t) is[r][t] = _mm256_dpbusd_epi32(is[r][t], w[r], a[t]);
  }
  __m256 da[N], sa[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    da[t] = _mm256_loadu_ps(reinterpret_cast<const float*>(pa[t] + ad));
    sa[t] = has_min<T>() ? _mm256_loadu_ps(reinterpret_cast<const float*>(pa[t] + ad + 32)) : _mm256_setzero_ps();
    pa[t] += act_group_bytes<T>(G);
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(pw[r] + 32 * G));
    const __m256 mv = has_min<T>() ? _mm256_loadu_ps(reinterpret_cast<const float*>(pw[r] + 32 * G + 32)) : _mm256_setzero_ps();
    pw[r] += w_group_bytes<T>(G);
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) acc[r][t] = fold<T>(acc[r][t], is[r][t], dw, da[t], mv, sa[t]);
  }
}

/// R rows (unpacked in c.wb) x N tokens.
template <ggml_type T, int R, int N>
CV_AVX512 void tile(const ctx& c, int32_t t0) {
  const uint8_t* pw[R];
  const uint8_t* pa[N];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) pw[r] = c.wb + static_cast<size_t>(r) * c.wstride;
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) pa[t] = c.ab + static_cast<size_t>(t0 + t) * c.astride;
  __m256 acc[R][N];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int32_t b = 0; b + 8 <= c.nb; b += 8) group<T, R, N, 8>(pw, pa, acc);
  if (c.nb & 4) group<T, R, N, 4>(pw, pa, acc);
  if (c.nb & 2) group<T, R, N, 2>(pw, pa, acc);
  if (c.nb & 1) group<T, R, N, 1>(pw, pa, acc);
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t)
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) store(*c.j, t0 + t, c.r0 + r, acc[r][t]);
}

/// One group of the m == 1 path: rows unpacked in registers straight from the weights (packed
/// when P).
template <ggml_type T, bool P, int R, int G>
CV_AVX512 inline void group1(const uint8_t* (&pw)[R], const uint8_t*& pa, __m256 (&acc)[R], size_t pf) {
  constexpr bool corr = layout<T>().off != 0;
  constexpr int ad = 32 * G + (corr ? 32 : 0);
  __m256i a[G];
  #pragma GCC unroll 8
  for (int i = 0; i < G; ++i) a[i] = ld(pa + 32 * i);
  const __m256i c = corr ? ld(pa + 32 * G) : _mm256_setzero_si256();
  const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(pa + ad));
  const __m256 sa = has_min<T>() ? _mm256_loadu_ps(reinterpret_cast<const float*>(pa + ad + 32)) : _mm256_setzero_ps();
  pa += act_group_bytes<T>(G);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    // The rows a few tiles ahead (the same bytes of them): a decode step's row chunks are short
    // streams, too short for the hardware prefetcher to ramp up on.
    for (int l = 0; l < G * layout<T>().bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(pw[r] + pf + l), _MM_HINT_T0);
    __m256i v[G];
    __m256 dw, mv = _mm256_setzero_ps();
    if constexpr (P) load_packed<T, G>(pw[r], v, dw, mv);
    else load_wgroup<T, G>(pw[r], v, dw, mv);
    pw[r] += static_cast<size_t>(G) * layout<T>().bytes;
    __m256i s0 = c, s1 = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int i = 0; i < G; i += 2) {
      s0 = _mm256_dpbusd_epi32(s0, v[i], a[i]);
      if (i + 1 < G) s1 = _mm256_dpbusd_epi32(s1, v[i + 1], a[i + 1]);
    }
    acc[r] = fold<T>(acc[r], _mm256_add_epi32(s0, s1), dw, da, mv, sa);
  }
}

/// R rows x the single token of an m == 1 job.
template <ggml_type T, bool P, int R>
CV_AVX512 void tile1(const ctx& c, int32_t) {
  const qmm_job& j = *c.j;
  const uint8_t* pw[R];
  const uint8_t* pa = c.ab;
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) pw[r] = j.w + static_cast<size_t>(c.r0 + r) * j.w_row_bytes;
  __m256 acc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const size_t pf = static_cast<size_t>(kPrefetchRows) * j.w_row_bytes;
  for (int32_t b = 0; b + 8 <= c.nb; b += 8) group1<T, P, R, 8>(pw, pa, acc, pf);
  if (c.nb & 4) group1<T, P, R, 4>(pw, pa, acc, pf);
  if (c.nb & 2) group1<T, P, R, 2>(pw, pa, acc, pf);
  if (c.nb & 1) group1<T, P, R, 1>(pw, pa, acc, pf);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) store(j, 0, c.r0 + r, acc[r]);
}

using tile_fn = void (*)(const ctx&, int32_t);

template <ggml_type T, size_t... I>
constexpr std::array<tile_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{&tile<T, static_cast<int>(I) / kToks + 1, static_cast<int>(I) % kToks + 1>...}};
}
template <ggml_type T, bool P, size_t... I>
constexpr std::array<tile_fn, sizeof...(I)> make_table1(std::index_sequence<I...>) {
  return {{&tile1<T, P, static_cast<int>(I) + 1>...}};
}

CV_AVX512 inline uint8_t* aligned64(std::vector<uint8_t>& v, size_t bytes) {
  if (v.size() < bytes + 64) v.resize(bytes + 64);
  return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
}

template <ggml_type T, bool P> CV_AVX512 void run(const qmm_job& j) {
  static constexpr auto table = make_table<T>(std::make_index_sequence<kRows * kToks>{});
  constexpr int rows1 = kRowsM1;
  static constexpr auto table1 = make_table1<T, P>(std::make_index_sequence<rows1>{});
  thread_local std::vector<uint8_t> abuf, wbuf;
  const int32_t nb = j.k / 32;
  const size_t astride = (act_bytes<T>(nb) + 63) & ~size_t{63}, wstride = (w_bytes<T>(nb) + 63) & ~size_t{63};
  uint8_t* ab = aligned64(abuf, astride * j.m);
  for (int32_t t = 0; t < j.m; ++t) repack_row<T>(j.act + static_cast<size_t>(t) * j.act_stride, nb, ab + astride * t);
  ctx c{&j, nb, 0, nullptr, wstride, ab, astride};
  if (j.m == 1) {
    for (int32_t r0 = 0; r0 < j.n_rows; r0 += rows1) {
      c.r0 = r0;
      table1[static_cast<size_t>(std::min(rows1, j.n_rows - r0) - 1)](c, 0);
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

template <ggml_type T> CV_AVX512 void pack_rows(const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst) {
  const size_t rb = static_cast<size_t>(k / 32) * layout<T>().bytes;
  for (int32_t r = 0; r < rows; ++r) pack_row<T>(src + rb * r, k / 32, dst + rb * r);
}

} // namespace

void qmm_legacy_avx512_quant(const qmm_job& j) {
  if (j.packed && j.m >= 2 && j.m <= kSmallM && small_enabled()) return qmm_legacy_avx512_small(j);
  return j.packed ? dispatch<true>(j) : dispatch<false>(j);
}

void qmm_legacy_avx512_pack(ggml_type t, const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst) {
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
