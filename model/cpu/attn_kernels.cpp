#include "model/cpu/attn_kernels.hpp"

// GCC 12's AVX-512 headers self-initialise their "undefined" vectors (`__m512 __Y = __Y;`, GCC
// PR105593), which -Wmaybe-uninitialized reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "model/formats/dequant.hpp"

#define CV_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

namespace conveyor::model {
namespace {

// Eight cached values as floats: f32 as is, f16 widened by F16C (exact).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// KC chunks of keys times QN queries, KC * QN accumulators: the chunks' vectors are loaded once
// a dimension for every query. A tile keeps every chain separate, so its size changes no bit.
// The loops are unrolled by pragma (GCC keeps an array it unrolls late in memory, storing every
// sum each dimension), and a dimension's step holds either the KC key vectors or the QN query
// broadcasts, whichever are fewer: 4 x 3 takes all 16 ymm registers (12 sums, 3 queries, a key).
template <int KC, int QN, class T>
void tile8(const T* const* chunk, const int32_t* pos, int64_t stride, int32_t hd, const float* q, float scale, float* s,
           int64_t s_stride) {
  __m256 acc[KC][QN];
  #pragma GCC unroll 8
  for (int c = 0; c < KC; ++c)
    #pragma GCC unroll 8
    for (int i = 0; i < QN; ++i) acc[c][i] = _mm256_setzero_ps();
  for (int32_t d = 0; d < hd; ++d) {
    if constexpr (KC <= QN) {
      __m256 k[KC];
      #pragma GCC unroll 8
      for (int c = 0; c < KC; ++c) k[c] = load8(chunk[c] + d * stride);
      #pragma GCC unroll 8
      for (int i = 0; i < QN; ++i) {
        const __m256 qd = _mm256_broadcast_ss(q + i * hd + d);
        #pragma GCC unroll 8
        for (int c = 0; c < KC; ++c) acc[c][i] = _mm256_fmadd_ps(qd, k[c], acc[c][i]);
      }
    } else {
      __m256 qd[QN];
      #pragma GCC unroll 8
      for (int i = 0; i < QN; ++i) qd[i] = _mm256_broadcast_ss(q + i * hd + d);
      #pragma GCC unroll 8
      for (int c = 0; c < KC; ++c) {
        const __m256 k = load8(chunk[c] + d * stride);
        #pragma GCC unroll 8
        for (int i = 0; i < QN; ++i) acc[c][i] = _mm256_fmadd_ps(qd[i], k, acc[c][i]);
      }
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
  #pragma GCC unroll 8
  for (int c = 0; c < KC; ++c)
    #pragma GCC unroll 8
    for (int i = 0; i < QN; ++i) _mm256_storeu_ps(s + i * s_stride + pos[c], _mm256_mul_ps(acc[c][i], sc));
}

CV_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
CV_AVX512 inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <int KC, int QN, class T>
CV_AVX512 void tile16(const T* const* chunk, const int32_t* pos, int64_t stride, int32_t hd, const float* q, float scale,
                      float* s, int64_t s_stride) {
  __m512 acc[KC][QN];
  #pragma GCC unroll 8
  for (int c = 0; c < KC; ++c)
    #pragma GCC unroll 8
    for (int i = 0; i < QN; ++i) acc[c][i] = _mm512_setzero_ps();
  for (int32_t d = 0; d < hd; ++d) {
    __m512 k[KC];
    #pragma GCC unroll 8
    for (int c = 0; c < KC; ++c) k[c] = load16(chunk[c] + d * stride);
    #pragma GCC unroll 8
    for (int i = 0; i < QN; ++i) {
      const __m512 qd = _mm512_set1_ps(q[i * hd + d]);
      #pragma GCC unroll 8
      for (int c = 0; c < KC; ++c) acc[c][i] = _mm512_fmadd_ps(qd, k[c], acc[c][i]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  #pragma GCC unroll 8
  for (int c = 0; c < KC; ++c)
    #pragma GCC unroll 8
    for (int i = 0; i < QN; ++i) _mm512_storeu_ps(s + i * s_stride + pos[c], _mm512_mul_ps(acc[c][i], sc));
}

inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return fp16_to_fp32(*p); }

template <class T>
void scalar_chunks(int32_t lanes, const T* const* chunk, const int32_t* pos, int32_t n_chunks, int64_t stride, int32_t hd,
                   const float* q, int32_t nq, float scale, float* s, int64_t s_stride) {
  for (int32_t i = 0; i < nq; ++i)
    for (int32_t c = 0; c < n_chunks; ++c)
      for (int32_t x = 0; x < lanes; ++x) {
        float acc = 0.0f;
        for (int32_t d = 0; d < hd; ++d) acc = std::fma(q[i * hd + d], load1(chunk[c] + d * stride + x), acc);
        s[i * s_stride + pos[c] + x] = acc * scale;
      }
}

// A tile function for a (KC, QN) pair; vector_chunks walks the chunks a group at a time and,
// for each group, the queries QN at a time.
template <class T>
using tile_fn = void (*)(const T* const*, const int32_t*, int64_t, int32_t, const float*, float, float*, int64_t);

template <class T, bool Wide, int KC, int QN>
constexpr tile_fn<T> pick() {
  if constexpr (Wide) return &tile16<KC, QN, T>;
  else return &tile8<KC, QN, T>;
}

template <class T, bool Wide, int KC>
tile_fn<T> with_qn(int32_t qn) {
  switch (qn) {
    case 1: return pick<T, Wide, KC, 1>();
    case 2: return pick<T, Wide, KC, 2>();
    case 3: return pick<T, Wide, KC, 3>();
    case 4: return pick<T, Wide, KC, 4>();
    case 5: return pick<T, Wide, KC, 5>();
    default: return pick<T, Wide, KC, 6>();
  }
}

constexpr int32_t max_qn = 6;

// Chunks a tile takes for qn queries: enough chains in flight to cover the FMA latency (8 or
// more where the registers allow: 16 ymm, 32 zmm). A power of two, 8 only for one query.
template <bool Wide>
int32_t max_kc(int32_t qn) {
  if (qn == 1) return 8;
  if (qn <= 3 || Wide) return 4;
  return 2;
}

template <class T, bool Wide>
void vector_chunks(const T* const* chunk, const int32_t* pos, int32_t n_chunks, int64_t stride, int32_t hd, const float* q,
                   int32_t nq, float scale, float* s, int64_t s_stride) {
  for (int32_t c0 = 0; c0 < n_chunks;) {
    // A group of chunks is used by every query before the next: it stays in L1 meanwhile.
    int32_t kc = max_kc<Wide>(std::min(nq, max_qn));
    while (kc > n_chunks - c0) kc /= 2;
    for (int32_t i0 = 0; i0 < nq; i0 += max_qn) {
      const int32_t qn = std::min(max_qn, nq - i0);
      const int32_t k = std::min(kc, max_kc<Wide>(qn));
      const tile_fn<T> tile = k == 8 ? pick<T, Wide, 8, 1>()
                              : k == 4 ? with_qn<T, Wide, 4>(qn)
                              : k == 2 ? with_qn<T, Wide, 2>(qn)
                                       : with_qn<T, Wide, 1>(qn);
      for (int32_t c = c0; c < c0 + kc; c += k)
        tile(chunk + c, pos + c, stride, hd, q + int64_t{i0} * hd, scale, s + i0 * s_stride, s_stride);
    }
    c0 += kc;
  }
}

// P · V: W registers of the output (8 floats each) through the block's rows in order.
template <int W, class T>
void pv_chunk8(const float* p, const T* vb, int64_t stride, int32_t len, float* out) {
  __m256 a[W];
  for (int w = 0; w < W; ++w) a[w] = _mm256_loadu_ps(out + 8 * w);
  for (int32_t r = 0; r < len; ++r) {
    const __m256 pr = _mm256_set1_ps(p[r]);
    const T* v = vb + r * stride;
    for (int w = 0; w < W; ++w) a[w] = _mm256_fmadd_ps(pr, load8(v + 8 * w), a[w]);
  }
  for (int w = 0; w < W; ++w) _mm256_storeu_ps(out + 8 * w, a[w]);
}

template <class T>
void pv_rest(const float* p, const T* vb, int64_t stride, int32_t len, float* out, int32_t d, int32_t n) {
  for (; d + 32 <= n; d += 32) pv_chunk8<4, T>(p, vb + d, stride, len, out + d);
  for (; d + 8 <= n; d += 8) pv_chunk8<1, T>(p, vb + d, stride, len, out + d);
  for (; d < n; ++d)
    for (int32_t r = 0; r < len; ++r) out[d] = std::fma(p[r], load1(vb + r * stride + d), out[d]);
}

// P · V for QN queries over the same rows, 32 of the head's dimensions: 4 * QN sums, a row's
// QN weights broadcast once and each V vector loaded (and widened) once for all of them. Every
// element's chain is accumulate_pv's (rows in order, one FMA each), so grouping changes no bit.
template <int QN, class T>
void pv_group32(const float* const* p, const T* vb, int64_t stride, int32_t len, float* const* out) {
  __m256 a[QN][4];
  #pragma GCC unroll 4
  for (int i = 0; i < QN; ++i)
    #pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) a[i][w] = _mm256_loadu_ps(out[i] + 8 * w);
  for (int32_t r = 0; r < len; ++r) {
    __m256 pr[QN];
    #pragma GCC unroll 4
    for (int i = 0; i < QN; ++i) pr[i] = _mm256_broadcast_ss(p[i] + r);
    const T* v = vb + r * stride;
    #pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) {
      const __m256 x = load8(v + 8 * w);
      #pragma GCC unroll 4
      for (int i = 0; i < QN; ++i) a[i][w] = _mm256_fmadd_ps(pr[i], x, a[i][w]);
    }
  }
  #pragma GCC unroll 4
  for (int i = 0; i < QN; ++i)
    #pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) _mm256_storeu_ps(out[i] + 8 * w, a[i][w]);
}

} // namespace

int32_t score_lanes(cpu_isa isa, int32_t block_size) {
  if (isa == cpu_isa::avx512 && block_size % 16 == 0) return 16;
  if (isa != cpu_isa::scalar && block_size % 8 == 0) return 8;
  return 1;
}

template <class T>
void score_chunks(cpu_isa isa, int32_t lanes, const T* const* chunk, const int32_t* pos, int32_t n_chunks, int64_t stride,
                  int32_t hd, const float* q, int32_t nq, float scale, float* s, int64_t s_stride) {
  if (lanes == 16 && isa == cpu_isa::avx512)
    vector_chunks<T, true>(chunk, pos, n_chunks, stride, hd, q, nq, scale, s, s_stride);
  else if (lanes == 8 && isa != cpu_isa::scalar)
    vector_chunks<T, false>(chunk, pos, n_chunks, stride, hd, q, nq, scale, s, s_stride);
  else
    scalar_chunks(lanes, chunk, pos, n_chunks, stride, hd, q, nq, scale, s, s_stride);
}

template <class T>
void accumulate_pv(const float* p, const T* vb, int64_t stride, int32_t len, float* out, int32_t n) {
  int32_t d = 0;
  for (; d + 64 <= n; d += 64) pv_chunk8<8, T>(p, vb + d, stride, len, out + d);
  pv_rest(p, vb, stride, len, out, d, n);
}

template <class T>
void accumulate_pv_group(const float* const* p, int32_t nq, const T* vb, int64_t stride, int32_t len, float* const* out,
                         int32_t n) {
  for (int32_t i0 = 0; i0 < nq; i0 += 3) {
    const int32_t g = std::min(3, nq - i0);
    if (g == 1) {
      accumulate_pv(p[i0], vb, stride, len, out[i0], n);
      continue;
    }
    int32_t d = 0;
    for (; d + 32 <= n; d += 32) {
      float* o[3];
      for (int32_t i = 0; i < g; ++i) o[i] = out[i0 + i] + d;
      if (g == 3) pv_group32<3, T>(p + i0, vb + d, stride, len, o);
      else pv_group32<2, T>(p + i0, vb + d, stride, len, o);
    }
    for (int32_t i = 0; i < g && d < n; ++i) pv_rest(p[i0 + i], vb, stride, len, out[i0 + i], d, n);
  }
}

template void accumulate_pv<uint16_t>(const float*, const uint16_t*, int64_t, int32_t, float*, int32_t);
template void accumulate_pv<float>(const float*, const float*, int64_t, int32_t, float*, int32_t);
template void accumulate_pv_group<uint16_t>(const float* const*, int32_t, const uint16_t*, int64_t, int32_t, float* const*,
                                            int32_t);
template void accumulate_pv_group<float>(const float* const*, int32_t, const float*, int64_t, int32_t, float* const*,
                                         int32_t);
template void score_chunks<uint16_t>(cpu_isa, int32_t, const uint16_t* const*, const int32_t*, int32_t, int64_t, int32_t,
                                     const float*, int32_t, float, float*, int64_t);
template void score_chunks<float>(cpu_isa, int32_t, const float* const*, const int32_t*, int32_t, int64_t, int32_t,
                                  const float*, int32_t, float, float*, int64_t);

} // namespace conveyor::model
