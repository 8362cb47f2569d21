// Internal to model/cpu/qmm_avx2_q.cpp: the "block per lane" layout of the AVX2 legacy qmm
// kernel, the AVX-512 kernel's layout (qmm_avx512_q_pack.hpp, whose header comment explains it)
// built from AVX2 instructions: lane L of a group's vectors holds 4 bytes of block L / (8 / G),
// so that a group's integer dots fold into one vector of 8 exact per-block sums and its float
// work is one cvt, one mul and one fma for up to 8 blocks. Differences from AVX-512: the dots
// are maddubs (u8 x s8 -> s16 pairs) + madd, so Q8_0 weights stay signed (sign trick, no +128
// offset) and only Q4_0 / Q5_0 carry the -off * sum(a) correction.
#pragma once
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "model/cpu/qmm_kernels.hpp"

#define CV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace conveyor::model::qmm256 {

constexpr int kRows = 2;    // tile rows for m > 1 (row block unpacked at once)
constexpr int kToks = 2;    // tile tokens for m > 1
constexpr int kRowsM1 = 4;  // rows per tile at m == 1
constexpr int kChunk = 128; // tokens per pass over the weights
constexpr int kPrefetchRows = 8;  // m == 1: rows ahead that the tile prefetches

struct blk_layout { int bytes, m, qh, qs, off; };  // byte offsets (-1: absent); off: weight centre
template <ggml_type T> constexpr blk_layout layout() {
  switch (T) {
    case ggml_type::q4_0: return {18, -1, -1, 2, 8};
    case ggml_type::q4_1: return {20, 2, -1, 4, 0};
    case ggml_type::q5_0: return {22, -1, 2, 6, 16};
    case ggml_type::q5_1: return {24, 2, 4, 8, 0};
    default: return {34, -1, -1, 2, 0};  // q8_0: signed weights, the sign trick
  }
}
template <ggml_type T> constexpr bool has_min() { return layout<T>().m >= 0; }
template <ggml_type T> constexpr bool has_corr() { return layout<T>().off != 0; }

/// Activation group: G vectors, [corr], da, [s]; weight group (unpacked): G vectors, dw, [mins].
template <ggml_type T> constexpr int act_group_bytes(int G) { return 32 * G + (has_corr<T>() ? 32 : 0) + 32 + (has_min<T>() ? 32 : 0); }
template <ggml_type T> constexpr int w_group_bytes(int G) { return 32 * G + 32 + (has_min<T>() ? 32 : 0); }
template <ggml_type T, int (*F)(int)> constexpr size_t row_bytes(int32_t nb) {
  return static_cast<size_t>(nb / 8) * F(8) + ((nb & 4) ? F(4) : 0) + ((nb & 2) ? F(2) : 0) + ((nb & 1) ? F(1) : 0);
}

#define QMM_TARGET CV_AVX2
#include "model/cpu/qmm_lane_gather.hpp"  // ld, st, ld2, gather16, gather32, dword_of_blocks, d_of
#undef QMM_TARGET

/// Lane L -> block L / (8 / G), as permutevar8x32 indices.
template <int G> CV_AVX2 inline __m256i lane_block() {
  return _mm256_setr_epi32(0 / (8 / G), 1 / (8 / G), 2 / (8 / G), 3 / (8 / G), 4 / (8 / G), 5 / (8 / G), 6 / (8 / G), 7 / (8 / G));
}
/// Lanes 0 .. n-1 set, as a maskload mask.
CV_AVX2 inline __m256i first_lanes(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
/// The first lane of each block of a group of G (the min terms live there only).
template <int G> CV_AVX2 inline __m256 first_of_block(__m256 v) {
  constexpr int m = G == 8 ? 0xFF : G == 4 ? 0x55 : G == 2 ? 0x11 : 0x01;
  return _mm256_blend_ps(_mm256_setzero_ps(), v, m);
}

/// Adds 16 to the bytes of vector i whose Q5 high bit is set (qhv lane L = qh of its block).
template <int G, int i> CV_AVX2 inline __m256i add_high(__m256i v, __m256i qhv) {
  const __m256i sh = _mm256_setr_epi32(4 * d_of(G, i, 0), 4 * d_of(G, i, 1), 4 * d_of(G, i, 2), 4 * d_of(G, i, 3),
                                       4 * d_of(G, i, 4), 4 * d_of(G, i, 5), 4 * d_of(G, i, 6), 4 * d_of(G, i, 7));
  const __m256i bits = _mm256_srlv_epi32(qhv, sh);
  const __m256i bc = _mm256_shuffle_epi8(bits, _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                                                 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
  const __m256i sel = _mm256_set1_epi32(0x08040201);
  return _mm256_or_si256(v, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bc, sel), sel), _mm256_set1_epi8(0x10)));
}

template <int... I, class F> CV_AVX2 inline void for_i(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

/// 8 f16 from the low (hi = false) or high halves of v's dwords, as f32.
template <bool hi> CV_AVX2 inline __m256 halves_of(__m256i v) {
  if constexpr (hi) v = _mm256_srli_epi32(v, 16);
  const __m256i p = _mm256_packus_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_setzero_si256());
  return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
}

/// Nibble (and Q5 high-bit) vectors of a group from its G / 2 gathered qs vectors pk (G >= 2).
template <ggml_type T, int G> CV_AVX2 inline void split_nibbles(const __m256i* pk, __m256i qhv, __m256i* v) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
  for (int i = 0; i < G / 2; ++i) {
    v[i] = _mm256_and_si256(pk[i], nib);
    v[i + G / 2] = _mm256_and_si256(_mm256_srli_epi16(pk[i], 4), nib);
  }
  if constexpr (layout<T>().qh >= 0)
    for_i(std::make_integer_sequence<int, G>{}, [&](auto ic) { v[decltype(ic)::value] = add_high<G, decltype(ic)::value>(v[decltype(ic)::value], qhv); });
}

/// One block (G == 1) from its 16 qs bytes and qh: lanes 0-3 low nibbles, 4-7 high nibbles.
template <ggml_type T> CV_AVX2 inline __m256i one_block(const uint8_t* qs, const uint8_t* qh) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  __m256i v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_broadcastsi128_si256(q), _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0)), _mm256_set1_epi8(0x0F));
  if constexpr (layout<T>().qh >= 0) {
    int32_t h;
    std::memcpy(&h, qh, 4);
    v = add_high<1, 0>(v, _mm256_set1_epi32(h));
  }
  return v;
}

/// The group of G weight blocks at p (raw GGUF blocks): G u8 vectors (Q8_0: s8), scales per
/// lane, and (Q4_1 / Q5_1) the mins in the first lane of each block only.
template <ggml_type T, int G> CV_AVX2 inline void load_wgroup(const uint8_t* p, __m256i* v, __m256& dw, __m256& mv) {
  constexpr blk_layout L = layout<T>();
  constexpr size_t bs = L.bytes;
  if constexpr (T == ggml_type::q8_0) {
    gather32<G>(p + L.qs, bs, v);
  } else if constexpr (G == 1) {
    v[0] = one_block<T>(p + L.qs, p + L.qh);
  } else {
    __m256i pk[G / 2];
    gather16<G>(p + L.qs, bs, pk);
    split_nibbles<T, G>(pk, L.qh >= 0 ? dword_of_blocks<G>(p + (L.qh >= 0 ? L.qh : 0), bs) : _mm256_setzero_si256(), v);
  }
  const __m256i h = dword_of_blocks<G>(p, bs);
  dw = halves_of<false>(h);
  if constexpr (has_min<T>()) mv = first_of_block<G>(halves_of<true>(h));
}

// The packed layout (qmm_pack_rows for avx2): a group of G blocks keeps its G * bytes bytes as
// the G u8 / s8 vectors of Q8_0, or the G / 2 gathered qs vectors of Q4 / Q5 (G == 1: the 16 qs
// bytes), then Q5's G qh dwords, the G f16 scales, Q4_1 / Q5_1's G f16 mins.
template <ggml_type T> constexpr int packed_q_bytes(int G) { return T == ggml_type::q8_0 ? 32 * G : 16 * G; }

/// G f16 at p (lane L: block L / (8 / G)'s).
template <int G> CV_AVX2 inline __m256 halves_per_lane(const uint8_t* p) {
  if constexpr (G == 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) uint16_t h[8] = {};
  std::memcpy(h, p, 2 * G);
  return _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))), lane_block<G>());
}

template <ggml_type T, int G> CV_AVX2 inline void load_packed(const uint8_t* p, __m256i* v, __m256& dw, __m256& mv) {
  constexpr blk_layout L = layout<T>();
  const uint8_t* o = p + packed_q_bytes<T>(G);
  if constexpr (T == ggml_type::q8_0) {
    for (int i = 0; i < G; ++i) v[i] = ld(p + 32 * i);
  } else if constexpr (G == 1) {
    v[0] = one_block<T>(p, o);
  } else {
    __m256i pk[G / 2], qhv = _mm256_setzero_si256();
    for (int i = 0; i < G / 2; ++i) pk[i] = ld(p + 32 * i);
    if constexpr (L.qh >= 0)
      qhv = _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(reinterpret_cast<const int*>(o), first_lanes(G)), lane_block<G>());
    split_nibbles<T, G>(pk, qhv, v);
  }
  if constexpr (L.qh >= 0) o += 4 * G;
  dw = halves_per_lane<G>(o);
  if constexpr (has_min<T>()) mv = first_of_block<G>(halves_per_lane<G>(o + 2 * G));
}

template <ggml_type T, int G> CV_AVX2 inline void pack_group(const uint8_t* p, uint8_t* out) {
  constexpr blk_layout L = layout<T>();
  constexpr size_t bs = L.bytes;
  if constexpr (T == ggml_type::q8_0) {
    __m256i v[G];
    gather32<G>(p + L.qs, bs, v);
    for (int i = 0; i < G; ++i) st(out + 32 * i, v[i]);
  } else if constexpr (G == 1) {
    std::memcpy(out, p + L.qs, 16);
  } else {
    __m256i pk[G / 2];
    gather16<G>(p + L.qs, bs, pk);
    for (int i = 0; i < G / 2; ++i) st(out + 32 * i, pk[i]);
  }
  uint8_t* o = out + packed_q_bytes<T>(G);
  const int hs = L.qh >= 0 ? 4 * G : 0;
  for (int b = 0; b < G; ++b) {
    if constexpr (L.qh >= 0) std::memcpy(o + 4 * b, p + bs * b + L.qh, 4);
    std::memcpy(o + hs + 2 * b, p + bs * b, 2);
    if constexpr (has_min<T>()) std::memcpy(o + hs + 2 * G + 2 * b, p + bs * b + L.m, 2);
  }
}

} // namespace conveyor::model::qmm256

#endif
