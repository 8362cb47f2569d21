// Shared by the block-per-lane legacy qmm layouts (qmm_avx512_q_pack.hpp, qmm_avx2_q_pack.hpp),
// which include it inside their own namespace with QMM_TARGET defined as their target attribute
// (the names stay distinct per ISA): 256-bit loads and stores, the dword gathers that put 4 bytes
// of block L / (8 / G) in lane L of a group's vectors, and which element dword each lane holds.
// Plain AVX2 instructions only. No include guard: one inclusion per namespace.
#ifndef QMM_TARGET
#error "define QMM_TARGET (the layout's target attribute) before including qmm_lane_gather.hpp"
#endif

QMM_TARGET inline __m256i ld(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
QMM_TARGET inline void st(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
QMM_TARGET inline __m256i ld2(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}

/// The G/2 vectors of a group (G >= 2) from 16-byte chunks at src + stride * c (c < G): out[p]
/// lane L = dword p * (8 / G) + L % (8 / G) of chunk L / (8 / G).
template <int G> QMM_TARGET inline void gather16(const uint8_t* s, size_t st_, __m256i* out) {
  if constexpr (G == 8) {
    const __m256i y0 = ld2(s, s + 4 * st_), y1 = ld2(s + st_, s + 5 * st_);
    const __m256i y2 = ld2(s + 2 * st_, s + 6 * st_), y3 = ld2(s + 3 * st_, s + 7 * st_);
    const __m256i t0 = _mm256_unpacklo_epi32(y0, y1), t1 = _mm256_unpackhi_epi32(y0, y1);
    const __m256i t2 = _mm256_unpacklo_epi32(y2, y3), t3 = _mm256_unpackhi_epi32(y2, y3);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
  } else if constexpr (G == 4) {
    const __m256i y0 = ld2(s, s + 2 * st_), y1 = ld2(s + st_, s + 3 * st_);
    out[0] = _mm256_unpacklo_epi64(y0, y1);
    out[1] = _mm256_unpackhi_epi64(y0, y1);
  } else {
    out[0] = ld2(s, s + st_);
  }
}

/// The G 8-bit vectors of a group of 32-byte blocks at p (stride st_): activations, Q8_0 weights.
template <int G> QMM_TARGET inline void gather32(const uint8_t* p, size_t st_, __m256i* v) {
  if constexpr (G == 1) {
    v[0] = ld(p);
  } else {
    gather16<G>(p, st_, v);
    gather16<G>(p + 16, st_, v + G / 2);
  }
}

/// Lane L: the first dword of block L / (8 / G) (blocks bs bytes apart from p).
template <int G> QMM_TARGET inline __m256i dword_of_blocks(const uint8_t* p, size_t bs) {
  if constexpr (G == 8) {  // 16-byte loads stay inside each block (header, qh: offset + 16 <= bytes)
    const __m256i y0 = ld2(p, p + 4 * bs), y1 = ld2(p + bs, p + 5 * bs);
    const __m256i y2 = ld2(p + 2 * bs, p + 6 * bs), y3 = ld2(p + 3 * bs, p + 7 * bs);
    return _mm256_unpacklo_epi64(_mm256_unpacklo_epi32(y0, y1), _mm256_unpacklo_epi32(y2, y3));
  } else {
    auto u = [&](int c) {
      uint32_t x;
      std::memcpy(&x, p + static_cast<size_t>(c / (8 / G)) * bs, 4);
      return static_cast<int>(x);
    };
    return _mm256_setr_epi32(u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7));
  }
}

/// Element dword held by vector i, lane L of a group of G blocks (lane L: block L / (8 / G)).
constexpr int d_of(int G, int i, int L) {
  if (G == 1) return L;
  const int h = G / 2, per = 8 / G;
  return (i % h) * per + L % per + 4 * (i / h);
}

