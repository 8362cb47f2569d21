// Internal to model/cpu/qmm_avx512_q.cpp: the "block per lane" data layout of the AVX-512 legacy
// qmm kernel (see that file's header comment): block geometry per type, the dword gathers, and
// the once-per-call activation repack and per-row-tile weight unpack.
#pragma once
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "model/cpu/qmm_kernels.hpp"

#define CV_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace conveyor::model::qmm512 {

constexpr int kRows = 4;    // tile rows (row block unpacked at once)
constexpr int kToks = 2;    // tile tokens for m > 1
constexpr int kRowsM1 = 4;  // rows per tile at m == 1
constexpr int kChunk = 128; // tokens per pass over the weights
constexpr int kPrefetchRows = 8; // m == 1: rows ahead that tile1 prefetches
constexpr int kSmallM = 8;       // packed steps of 2 .. kSmallM tokens: qmm_avx512_q_small.cpp

/// False when CONVEYOR_QMM_SMALL=0 is in the environment (the small-step path off, for A/B runs).
inline bool small_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("CONVEYOR_QMM_SMALL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

struct blk_layout { int bytes, m, qh, qs, off; };  // byte offsets (-1: absent); off: weight centre
template <ggml_type T> constexpr blk_layout layout() {
  switch (T) {
    case ggml_type::q4_0: return {18, -1, -1, 2, 8};
    case ggml_type::q4_1: return {20, 2, -1, 4, 0};
    case ggml_type::q5_0: return {22, -1, 2, 6, 16};
    case ggml_type::q5_1: return {24, 2, 4, 8, 0};
    default: return {34, -1, -1, 2, 128};  // q8_0: weights taken as w + 128
  }
}

template <ggml_type T> constexpr bool has_min() { return layout<T>().m >= 0; }
/// Bytes of one group in the activation buffer: G vectors, [corr], da, [s]; in the weight
/// buffer: G vectors, dw, [mins].
template <ggml_type T> constexpr int act_group_bytes(int G) {
  return 32 * G + (layout<T>().off ? 32 : 0) + 32 + (has_min<T>() ? 32 : 0);
}
template <ggml_type T> constexpr int w_group_bytes(int G) { return 32 * G + 32 + (has_min<T>() ? 32 : 0); }
template <ggml_type T> constexpr size_t act_bytes(int32_t nb) {
  return static_cast<size_t>(nb / 8) * act_group_bytes<T>(8) + ((nb & 4) ? act_group_bytes<T>(4) : 0) +
         ((nb & 2) ? act_group_bytes<T>(2) : 0) + ((nb & 1) ? act_group_bytes<T>(1) : 0);
}
template <ggml_type T> constexpr size_t w_bytes(int32_t nb) {
  return static_cast<size_t>(nb / 8) * w_group_bytes<T>(8) + ((nb & 4) ? w_group_bytes<T>(4) : 0) +
         ((nb & 2) ? w_group_bytes<T>(2) : 0) + ((nb & 1) ? w_group_bytes<T>(1) : 0);
}

#define QMM_TARGET CV_AVX512
#include "model/cpu/qmm_lane_gather.hpp"  // ld, st, ld2, gather16, gather32, dword_of_blocks, d_of
#undef QMM_TARGET

template <int G, int i> CV_AVX512 inline __m256i shift_of() {
  return _mm256_setr_epi32(4 * d_of(G, i, 0), 4 * d_of(G, i, 1), 4 * d_of(G, i, 2), 4 * d_of(G, i, 3),
                           4 * d_of(G, i, 4), 4 * d_of(G, i, 5), 4 * d_of(G, i, 6), 4 * d_of(G, i, 7));
}

/// Adds 16 to the bytes whose Q5 high bit is set: vector i of the group, qhv lane L = qh of its block.
template <int G, int i> CV_AVX512 inline __m256i add_high(__m256i v, __m256i qhv) {
  if constexpr (G == 8) {  // d = i in every lane: bits 4i .. 4i+3 sit in byte i / 2 of each dword
    constexpr char b = i / 2;
    const __m256i bc = _mm256_shuffle_epi8(qhv, _mm256_setr_epi8(b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b,
                                                                  12 + b, 12 + b, 12 + b, 12 + b, b, b, b, b, 4 + b, 4 + b, 4 + b,
                                                                  4 + b, 8 + b, 8 + b, 8 + b, 8 + b, 12 + b, 12 + b, 12 + b, 12 + b));
    const __mmask32 mk = _mm256_test_epi8_mask(bc, _mm256_set1_epi32(i % 2 ? static_cast<int>(0x80402010u) : 0x08040201));
    return _mm256_mask_add_epi8(v, mk, v, _mm256_set1_epi8(0x10));
  }
  const __m256i bits = _mm256_srlv_epi32(qhv, shift_of<G, i>());
  const __m256i bc = _mm256_shuffle_epi8(bits, _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                                                 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
  const __mmask32 mk = _mm256_test_epi8_mask(bc, _mm256_set1_epi32(0x08040201));
  return _mm256_mask_add_epi8(v, mk, v, _mm256_set1_epi8(0x10));
}

template <int G, int... I, class F> CV_AVX512 inline void for_i(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

/// The group of G weight blocks at p: G u8 vectors, the scales per lane and (Q4_1 / Q5_1) the
/// mins, in the first lane of each block only (zero elsewhere).
template <ggml_type T, int G> CV_AVX512 inline void load_wgroup(const uint8_t* p, __m256i* v, __m256& dw, __m256& mv) {
  constexpr blk_layout L = layout<T>();
  constexpr size_t bs = L.bytes;
  if constexpr (T == ggml_type::q8_0) {
    gather32<G>(p + L.qs, bs, v);
    #pragma GCC unroll 8
    for (int i = 0; i < G; ++i) v[i] = _mm256_xor_si256(v[i], _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    if constexpr (G == 1) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + L.qs));
      v[0] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_broadcastsi128_si256(q), _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0)), nib);
      if constexpr (L.qh >= 0) {
        uint32_t qh;
        std::memcpy(&qh, p + L.qh, sizeof qh);
        v[0] = _mm256_mask_add_epi8(v[0], static_cast<__mmask32>(qh), v[0], _mm256_set1_epi8(0x10));
      }
    } else {
      __m256i pk[G / 2];
      gather16<G>(p + L.qs, bs, pk);
      #pragma GCC unroll 8
      for (int i = 0; i < G / 2; ++i) {
        v[i] = _mm256_and_si256(pk[i], nib);
        v[i + G / 2] = _mm256_and_si256(_mm256_srli_epi16(pk[i], 4), nib);
      }
      if constexpr (L.qh >= 0) {
        const __m256i qhv = dword_of_blocks<G>(p + L.qh, bs);
        for_i<G>(std::make_integer_sequence<int, G>{}, [&](auto ic) {
          v[decltype(ic)::value] = add_high<G, decltype(ic)::value>(v[decltype(ic)::value], qhv);
        });
      }
    }
  }
  const __m256i h = dword_of_blocks<G>(p, bs);
  dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(h));
  if constexpr (has_min<T>()) {
    constexpr __mmask8 first = G == 8 ? 0xFF : G == 4 ? 0x55 : G == 2 ? 0x11 : 0x01;
    mv = _mm256_maskz_mov_ps(first, _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(h, 16))));
  }
}

/// The float step of a group, the same in every path: acc += cvt(isum) * (dw * da), then the
/// min term (Q4_1 / Q5_1).
template <ggml_type T> CV_AVX512 inline __m256 fold(__m256 acc, __m256i is, __m256 dw, __m256 da, __m256 mv, __m256 sa) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, da), acc);
  if constexpr (has_min<T>()) acc = _mm256_fmadd_ps(mv, sa, acc);
  return acc;
}

CV_AVX512 inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

/// c[t][r] (+)= the lanes' sum.
CV_AVX512 inline void store(const qmm_job& j, int32_t t, int32_t r, __m256 acc) {
  float& o = j.c[static_cast<size_t>(t) * static_cast<size_t>(j.ldc) + static_cast<size_t>(r)];
  const float h = hsum(acc);
  o = j.accumulate ? o + h : h;
}

// The packed weight layout (qmm_pack_rows, done once at load): a group of G blocks keeps its
// G * bytes bytes, rearranged so that load_packed needs no shuffles: the G u8 vectors of Q8_0
// (already + 128), or the G / 2 nibble vectors of Q4 / Q5 as gather16 leaves them (G == 1: the
// block's 16 qs bytes); then Q5's G qh dwords; the G f16 scales; Q4_1 / Q5_1's G f16 mins.
// load_packed gives exactly load_wgroup's vectors and floats, so packed and raw rows give the
// same bits in every path.
template <ggml_type T> constexpr int packed_q_bytes(int G) {
  return T == ggml_type::q8_0 ? 32 * G : 16 * G;
}

/// Lane L of a group of G blocks belongs to block L / (8 / G).
template <int G> CV_AVX512 inline __m256i lane_block() {
  return _mm256_setr_epi32(0 / (8 / G), 1 / (8 / G), 2 / (8 / G), 3 / (8 / G), 4 / (8 / G), 5 / (8 / G), 6 / (8 / G),
                           7 / (8 / G));
}

/// G f16 values at p, lane L holding block L / (8 / G)'s.
template <int G> CV_AVX512 inline __m256 halves_per_lane(const uint8_t* p) {
  const __m256 f = _mm256_cvtph_ps(_mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << G) - 1), p));
  if constexpr (G == 8) return f;
  else return _mm256_permutexvar_ps(lane_block<G>(), f);
}

template <ggml_type T, int G> CV_AVX512 inline void pack_group(const uint8_t* p, uint8_t* out) {
  constexpr blk_layout L = layout<T>();
  constexpr size_t bs = L.bytes;
  if constexpr (T == ggml_type::q8_0) {
    __m256i v[G];
    gather32<G>(p + L.qs, bs, v);
    #pragma GCC unroll 8
    for (int i = 0; i < G; ++i) st(out + 32 * i, _mm256_xor_si256(v[i], _mm256_set1_epi8(static_cast<char>(0x80))));
  } else if constexpr (G == 1) {
    std::memcpy(out, p + L.qs, 16);
  } else {
    __m256i pk[G / 2];
    gather16<G>(p + L.qs, bs, pk);
    #pragma GCC unroll 4
    for (int i = 0; i < G / 2; ++i) st(out + 32 * i, pk[i]);
  }
  uint8_t* o = out + packed_q_bytes<T>(G);
  for (int b = 0; b < G; ++b) {
    if constexpr (L.qh >= 0) std::memcpy(o + 4 * b, p + bs * b + L.qh, 4);
    const int hs = L.qh >= 0 ? 4 * G : 0;
    std::memcpy(o + hs + 2 * b, p + bs * b, 2);
    if constexpr (has_min<T>()) std::memcpy(o + hs + 2 * G + 2 * b, p + bs * b + L.m, 2);
  }
}

/// load_wgroup's result from a packed group.
template <ggml_type T, int G> CV_AVX512 inline void load_packed(const uint8_t* p, __m256i* v, __m256& dw, __m256& mv) {
  constexpr blk_layout L = layout<T>();
  const uint8_t* o = p + packed_q_bytes<T>(G);
  if constexpr (T == ggml_type::q8_0) {
    #pragma GCC unroll 8
    for (int i = 0; i < G; ++i) v[i] = ld(p + 32 * i);
  } else {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    if constexpr (G == 1) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      v[0] = _mm256_and_si256(_mm256_srlv_epi32(_mm256_broadcastsi128_si256(q), _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0)), nib);
      if constexpr (L.qh >= 0) {
        uint32_t qh;
        std::memcpy(&qh, o, sizeof qh);
        v[0] = _mm256_mask_add_epi8(v[0], static_cast<__mmask32>(qh), v[0], _mm256_set1_epi8(0x10));
      }
    } else {
      #pragma GCC unroll 4
      for (int i = 0; i < G / 2; ++i) {
        const __m256i pk = ld(p + 32 * i);
        v[i] = _mm256_and_si256(pk, nib);
        v[i + G / 2] = _mm256_and_si256(_mm256_srli_epi16(pk, 4), nib);
      }
      if constexpr (L.qh >= 0) {
        __m256i qhv = _mm256_maskz_loadu_epi32(static_cast<__mmask8>((1u << G) - 1), o);
        if constexpr (G != 8) qhv = _mm256_permutexvar_epi32(lane_block<G>(), qhv);
        for_i<G>(std::make_integer_sequence<int, G>{}, [&](auto ic) {
          v[decltype(ic)::value] = add_high<G, decltype(ic)::value>(v[decltype(ic)::value], qhv);
        });
      }
    }
  }
  if constexpr (L.qh >= 0) o += 4 * G;
  dw = halves_per_lane<G>(o);
  if constexpr (has_min<T>()) {
    constexpr __mmask8 first = G == 8 ? 0xFF : G == 4 ? 0x55 : G == 2 ? 0x11 : 0x01;
    mv = _mm256_maskz_mov_ps(first, halves_per_lane<G>(o + 2 * G));
  }
}

/// Unpacks the group of G blocks at p (a weight row, packed when P) into out (layout of
/// w_group_bytes).
template <ggml_type T, int G, bool P = false> CV_AVX512 inline void unpack_group(const uint8_t* p, uint8_t* out) {
  __m256i v[G];
  __m256 dw, mv = _mm256_setzero_ps();
  if constexpr (P) load_packed<T, G>(p, v, dw, mv);
  else load_wgroup<T, G>(p, v, dw, mv);
  #pragma GCC unroll 8
  for (int i = 0; i < G; ++i) st(out + 32 * i, v[i]);
  _mm256_storeu_ps(reinterpret_cast<float*>(out + 32 * G), dw);
  if constexpr (has_min<T>()) _mm256_storeu_ps(reinterpret_cast<float*>(out + 32 * G + 32), mv);
}

/// Repacks the group of G activation blocks (qs at q, scales at d) into out.
template <ggml_type T, int G> CV_AVX512 inline void repack_group(const uint8_t* q, const float* d, const float* sa, uint8_t* out) {
  constexpr blk_layout L = layout<T>();
  __m256i v[G];
  gather32<G>(q, 32, v);
  __m256i corr = _mm256_setzero_si256();
  #pragma GCC unroll 8
  for (int i = 0; i < G; ++i) {
    st(out + 32 * i, v[i]);
    if constexpr (L.off != 0) corr = _mm256_dpbusd_epi32(corr, _mm256_set1_epi8(static_cast<char>(L.off)), v[i]);
  }
  uint8_t* o = out + 32 * G;
  if constexpr (L.off != 0) {
    st(o, _mm256_sub_epi32(_mm256_setzero_si256(), corr));
    o += 32;
  }
  const __m256i idx = _mm256_setr_epi32(0 / (8 / G), 1 / (8 / G), 2 / (8 / G), 3 / (8 / G), 4 / (8 / G), 5 / (8 / G),
                                        6 / (8 / G), 7 / (8 / G));
  constexpr __mmask8 used = static_cast<__mmask8>((1u << G) - 1);
  _mm256_storeu_ps(reinterpret_cast<float*>(o), _mm256_permutexvar_ps(idx, _mm256_maskz_loadu_ps(used, d)));
  if constexpr (has_min<T>())
    _mm256_storeu_ps(reinterpret_cast<float*>(o + 32), _mm256_permutexvar_ps(idx, _mm256_maskz_loadu_ps(used, sa)));
}

/// Repacks nb activation blocks (qs at a, 32 bytes each; scales at d, q8_1 sums at s) into
/// groups of 8, then one each of 4, 2, 1.
template <ggml_type T> CV_AVX512 void repack_blocks(const uint8_t* a, const float* d, const float* s, int32_t nb, uint8_t* out) {
  int32_t b = 0;
  for (; b + 8 <= nb; b += 8, out += act_group_bytes<T>(8)) repack_group<T, 8>(a + 32 * b, d + b, s + b, out);
  if (nb & 4) { repack_group<T, 4>(a + 32 * b, d + b, s + b, out); b += 4; out += act_group_bytes<T>(4); }
  if (nb & 2) { repack_group<T, 2>(a + 32 * b, d + b, s + b, out); b += 2; out += act_group_bytes<T>(2); }
  if (nb & 1) repack_group<T, 1>(a + 32 * b, d + b, s + b, out);
}

/// Repacks a whole activation row of nb blocks (q8_0 / q8_1: qs, then scales, then sums).
template <ggml_type T> CV_AVX512 void repack_row(const uint8_t* a, int32_t nb, uint8_t* out) {
  const float* d = reinterpret_cast<const float*>(a + 32 * static_cast<size_t>(nb));
  repack_blocks<T>(a, d, d + nb, nb, out);  // d + nb: q8_1 sums (read only for Q4_1 / Q5_1)
}

/// Unpacks a row (nb blocks at w) into out, prefetching the row pf bytes ahead as it goes.
template <ggml_type T, bool P> CV_AVX512 void unpack_row(const uint8_t* w, int32_t nb, uint8_t* out, size_t pf) {
  constexpr size_t bs = layout<T>().bytes;
  for (size_t l = 0; l < bs * static_cast<size_t>(nb); l += 64) _mm_prefetch(reinterpret_cast<const char*>(w + pf + l), _MM_HINT_T0);
  int32_t b = 0;
  for (; b + 8 <= nb; b += 8, out += w_group_bytes<T>(8)) unpack_group<T, 8, P>(w + bs * b, out);
  if (nb & 4) { unpack_group<T, 4, P>(w + bs * b, out); b += 4; out += w_group_bytes<T>(4); }
  if (nb & 2) { unpack_group<T, 2, P>(w + bs * b, out); b += 2; out += w_group_bytes<T>(2); }
  if (nb & 1) unpack_group<T, 1, P>(w + bs * b, out);
}

/// One weight row (nb blocks at w) into the packed layout at out (the same number of bytes).
template <ggml_type T> CV_AVX512 void pack_row(const uint8_t* w, int32_t nb, uint8_t* out) {
  constexpr size_t bs = layout<T>().bytes;
  int32_t b = 0;
  for (; b + 8 <= nb; b += 8) pack_group<T, 8>(w + bs * b, out + bs * b);
  if (nb & 4) { pack_group<T, 4>(w + bs * b, out + bs * b); b += 4; }
  if (nb & 2) { pack_group<T, 2>(w + bs * b, out + bs * b); b += 2; }
  if (nb & 1) pack_group<T, 1>(w + bs * b, out + bs * b);
}

} // namespace conveyor::model::qmm512

#endif
