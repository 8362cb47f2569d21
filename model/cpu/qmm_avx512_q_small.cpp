// AVX-512 legacy qmm for short steps of packed weights (2 <= m <= kSmallM tokens: a speculative
// verification's 1 + k rows, small decode batches), called from qmm_avx512_q.cpp.
//
// The m > 1 path there unpacks each row tile into an L1 buffer and runs 256-bit tiles over it;
// at a few tokens that unpacking (a store and a reload of every weight byte) and the 256-bit
// vpdpbusd are most of the step. Here each weight row is decoded once per pass straight into
// registers (load_packed, as the m == 1 path does) and its blocks are taken in pairs of 8-block
// groups, A and B, as one 512-bit vector each: lanes 0-7 hold group A's dword, lanes 8-15 group
// B's. A 512-bit vpdpbusd does twice the products of a 256-bit one; on the 2-core Xeon of
// docs/benchmarks.md a throwaway loop ran them at ~1.7x the products per second (the kernel's
// own gain is smaller: docs/benchmarks.md, "Short steps without the unpacking"), and the activations of the m tokens are repacked once per call into the same
// pairs (zmm i = A's vector i | B's vector i, then the corrections, scales and sums likewise).
//
// NOTE: batch invariance. The float work stays that of the 256-bit kernel, group by group: the
// pair's int32 sums are converted and its scales multiplied as one 512-bit vector (lane for lane
// the same operations), then folded into the 8-lane accumulator as group A (its fma, then its
// min term), then as group B; the groups left over (8, 4, 2, 1 blocks) take fold as in
// qmm_avx512_q.cpp. So a (row, token) gets the same bits as on every other path.
#if defined(__x86_64__) || defined(__i386__)

// NOTE: GCC 12's AVX-512 headers self-initialise their "undefined" vectors (GCC PR105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "model/cpu/qmm_avx512_q_pack.hpp"
#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {

void qmm_legacy_avx512_small(const qmm_job& j);  // qmm_avx512_q.cpp's dispatch

namespace {

using namespace qmm512;

constexpr int kPass = 8;  // tokens per pass over a row: 8 accumulators + the row's 8 vectors

/// Bytes of a pair of 8-block groups in the activation buffer (two groups' bytes, interleaved
/// 32 bytes at a time).
template <ggml_type T> constexpr size_t act_pair_bytes() { return 2 * static_cast<size_t>(act_group_bytes<T>(8)); }

/// The activation row's layout for this path: nb / 16 pairs, then the remaining blocks in
/// repack_row's groups (8, 4, 2, 1).
template <ggml_type T> CV_AVX512 void repack_row_pairs(const uint8_t* a, int32_t nb, uint8_t* out) {
  const float* d = reinterpret_cast<const float*>(a + 32 * static_cast<size_t>(nb));
  const float* s = d + nb;
  constexpr int gb = act_group_bytes<T>(8);
  alignas(32) uint8_t ga[gb], gbuf[gb];
  int32_t b = 0;
  for (; b + 16 <= nb; b += 16, out += act_pair_bytes<T>()) {
    repack_group<T, 8>(a + 32 * b, d + b, s + b, ga);
    repack_group<T, 8>(a + 32 * (b + 8), d + b + 8, s + b + 8, gbuf);
    for (int c = 0; c < gb / 32; ++c) {
      st(out + 64 * c, ld(ga + 32 * c));
      st(out + 64 * c + 32, ld(gbuf + 32 * c));
    }
  }
  repack_blocks<T>(a + 32 * static_cast<size_t>(b), d + b, s + b, nb - b, out);
}

template <ggml_type T> constexpr size_t act_bytes_pairs(int32_t nb) {
  return static_cast<size_t>(nb / 16) * act_pair_bytes<T>() + act_bytes<T>(nb % 16);
}

CV_AVX512 inline __m512i ld512(const uint8_t* p) { return _mm512_loadu_si512(p); }
CV_AVX512 inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
CV_AVX512 inline __m512 join(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
CV_AVX512 inline __m256 lo(__m512 v) { return _mm512_castps512_ps256(v); }
CV_AVX512 inline __m256 hi(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/// One pair (blocks b .. b + 15 of the row at w) against N tokens (activation pair at a[t]).
template <ggml_type T, int N>
CV_AVX512 inline void pair(const uint8_t* w, const uint8_t* (&a)[N], __m256 (&acc)[N]) {
  constexpr bool corr = layout<T>().off != 0;
  constexpr int ad = 512 + (corr ? 64 : 0);  // scales' offset in an activation pair
  __m256i va[8], vb[8];
  __m256 dwa, dwb, mva = _mm256_setzero_ps(), mvb = _mm256_setzero_ps();
  load_packed<T, 8>(w, va, dwa, mva);
  load_packed<T, 8>(w + 8 * static_cast<size_t>(layout<T>().bytes), vb, dwb, mvb);
  __m512i v[8];
  #pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) v[i] = join(va[i], vb[i]);
  const __m512 dw = join(dwa, dwb);
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    __m512i s0 = corr ? ld512(a[t] + 512) : _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
      s0 = _mm512_dpbusd_epi32(s0, v[i], ld512(a[t] + 64 * i));
      s1 = _mm512_dpbusd_epi32(s1, v[i + 1], ld512(a[t] + 64 * (i + 1)));
    }
    const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
    const __m512 m = _mm512_mul_ps(dw, _mm512_loadu_ps(a[t] + ad));
    acc[t] = _mm256_fmadd_ps(lo(f), lo(m), acc[t]);
    if constexpr (has_min<T>()) acc[t] = _mm256_fmadd_ps(mva, _mm256_loadu_ps(reinterpret_cast<const float*>(a[t] + ad + 64)), acc[t]);
    acc[t] = _mm256_fmadd_ps(hi(f), hi(m), acc[t]);
    if constexpr (has_min<T>()) acc[t] = _mm256_fmadd_ps(mvb, _mm256_loadu_ps(reinterpret_cast<const float*>(a[t] + ad + 96)), acc[t]);
    a[t] += act_pair_bytes<T>();
  }
}

/// One leftover group of G blocks (row at w) against N tokens: the 256-bit step of qmm_avx512_q.cpp.
template <ggml_type T, int G, int N>
CV_AVX512 inline void rest(const uint8_t* w, const uint8_t* (&a)[N], __m256 (&acc)[N]) {
  constexpr bool corr = layout<T>().off != 0;
  constexpr int ad = 32 * G + (corr ? 32 : 0);
  __m256i v[G];
  __m256 dw, mv = _mm256_setzero_ps();
  load_packed<T, G>(w, v, dw, mv);
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    __m256i s0 = corr ? ld(a[t] + 32 * G) : _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int i = 0; i < G; i += 2) {
      s0 = _mm256_dpbusd_epi32(s0, v[i], ld(a[t] + 32 * i));
      if (i + 1 < G) s1 = _mm256_dpbusd_epi32(s1, v[i + 1], ld(a[t] + 32 * (i + 1)));
    }
    const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(a[t] + ad));
    const __m256 sa = has_min<T>() ? _mm256_loadu_ps(reinterpret_cast<const float*>(a[t] + ad + 32)) : _mm256_setzero_ps();
    acc[t] = fold<T>(acc[t], _mm256_add_epi32(s0, s1), dw, da, mv, sa);
    a[t] += act_group_bytes<T>(G);
  }
}

struct ctx {
  const qmm_job* j;
  int32_t nb;
  const uint8_t* ab;  // repacked tokens, astride apart
  size_t astride, pf;  // pf: bytes ahead to prefetch (kPrefetchRows rows)
};

/// Row r against tokens [t0, t0 + N).
template <ggml_type T, int N> CV_AVX512 void row_pass(const ctx& c, int32_t r, int32_t t0) {
  const qmm_job& j = *c.j;
  constexpr size_t bs = layout<T>().bytes;
  const uint8_t* w = j.w + static_cast<size_t>(r) * j.w_row_bytes;
  if (t0 == 0)  // a decode step's row chunks are short streams: see qmm_avx512_q.cpp's group1
    for (size_t l = 0; l < j.w_row_bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(w + c.pf + l), _MM_HINT_T0);
  const uint8_t* a[N];
  __m256 acc[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    a[t] = c.ab + static_cast<size_t>(t0 + t) * c.astride;
    acc[t] = _mm256_setzero_ps();
  }
  int32_t b = 0;
  for (; b + 16 <= c.nb; b += 16) pair<T, N>(w + bs * b, a, acc);
  if (c.nb & 8) { rest<T, 8, N>(w + bs * b, a, acc); b += 8; }
  if (c.nb & 4) { rest<T, 4, N>(w + bs * b, a, acc); b += 4; }
  if (c.nb & 2) { rest<T, 2, N>(w + bs * b, a, acc); b += 2; }
  if (c.nb & 1) rest<T, 1, N>(w + bs * b, a, acc);
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) store(j, t0 + t, r, acc[t]);
}

using pass_fn = void (*)(const ctx&, int32_t, int32_t);

template <ggml_type T, size_t... I> constexpr std::array<pass_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{&row_pass<T, static_cast<int>(I) + 1>...}};
}

template <ggml_type T> CV_AVX512 void run(const qmm_job& j) {
  static constexpr auto table = make_table<T>(std::make_index_sequence<kPass>{});
  thread_local std::vector<uint8_t> abuf;
  const int32_t nb = j.k / 32;
  const size_t astride = (act_bytes_pairs<T>(nb) + 63) & ~size_t{63};
  if (abuf.size() < astride * static_cast<size_t>(j.m) + 64) abuf.resize(astride * static_cast<size_t>(j.m) + 64);
  uint8_t* ab = abuf.data() + (64 - reinterpret_cast<uintptr_t>(abuf.data()) % 64) % 64;
  for (int32_t t = 0; t < j.m; ++t) repack_row_pairs<T>(j.act + static_cast<size_t>(t) * j.act_stride, nb, ab + astride * static_cast<size_t>(t));
  const ctx c{&j, nb, ab, astride, static_cast<size_t>(kPrefetchRows) * j.w_row_bytes};
  // Passes of equal size (10 tokens: 5 + 5), so no pass is left with one or two tokens.
  const int32_t passes = (j.m + kPass - 1) / kPass, per = (j.m + passes - 1) / passes;
  for (int32_t r = 0; r < j.n_rows; ++r)
    for (int32_t t0 = 0; t0 < j.m; t0 += per) table[static_cast<size_t>(std::min(per, j.m - t0) - 1)](c, r, t0);
}

} // namespace

void qmm_legacy_avx512_small(const qmm_job& j) {
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
