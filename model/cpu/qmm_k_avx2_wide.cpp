// AVX2 K-quant qmm for long steps (m >= kq::wide_m tokens), the AVX2 form of
// qmm_k_avx512_wide.cpp: lanes are weight rows. 8 rows' blocks are unpacked once per call into a
// row-interleaved scratch (ymm i = elements 4i..4i+3 of each of the 8 rows, unsigned bytes), and
// each token runs maddubs against it with its 4 activation bytes broadcast: a lane's two int16
// are pair sums of its row, added up in int16 over as many 4-element groups as cannot overflow
// (Q4_K 8, Q5_K 4, Q6_K 2: 2 * q_max * 128 per group), then madd with the row's scale as an
// int16 pair (sc, sc) gives an exact int32 per row. The mins (Q6_K: the -32 offset) are madds of
// per-row int16 pairs with the token's bsums. No horizontal reductions; the float step is kq_step
// lane-wise, so the bits equal qmm_kquant_scalar's (and the tiles').
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "model/cpu/qmm_k_common.hpp"

#define CV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace conveyor::model {
namespace {

#define QMM_TARGET CV_AVX2
#include "model/cpu/qmm_k_rowlane.hpp"
#undef QMM_TARGET

constexpr int kRows = 8;    // rows per scratch group (one ymm lane each)
constexpr int kTokens = 4;  // tokens per tile (16 ymm registers: 8 weights, 4 sums, temporaries)

/// Scratch bytes of one (8-row group, block): W[64] ymm of bytes | SC[ns] int16 pairs (sc, sc) per
/// row | PR[8] int16 pairs per row (as row_scales) | D | DMIN.
template <ggml_type T> struct layout {
  static constexpr int ns = T == ggml_type::q6_k ? 16 : 8;  // sub-blocks (scales) per block
  static constexpr int gs = 64 / ns;                        // 4-byte groups per sub-block
  static constexpr int hg = T == ggml_type::q4_k ? 8 : T == ggml_type::q5_k ? 4 : 2;  // groups per int16 sum
  static constexpr size_t w = 0, sc = 2048, pr = sc + 32 * ns, d = pr + 256, dmin = d + 32, bytes = dmin + 32;
};

/// out ymm i (i < 64) = dword i of each of the 8 rows of `bytes`: eight 8 x 8 dword transposes.
CV_AVX2 inline void transpose(const uint8_t (*bytes)[256], uint8_t* out) {
  for (int c = 0; c < 8; ++c) {
    __m256i t[8], u[8];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i a = rl_ld(bytes[2 * k] + 32 * c), b = rl_ld(bytes[2 * k + 1] + 32 * c);
      t[2 * k] = _mm256_unpacklo_epi32(a, b);
      t[2 * k + 1] = _mm256_unpackhi_epi32(a, b);
    }
    // u[4h + e], 128-bit lane L: dword 4L + e of rows 4h..4h+3.
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
      u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
      u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
      u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
#pragma GCC unroll 4
    for (int e = 0; e < 4; ++e) {
      uint8_t* o = out + 32 * static_cast<size_t>(8 * c + e);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o), _mm256_permute2x128_si256(u[e], u[4 + e], 0x20));        // 8c + e
      _mm256_store_si256(reinterpret_cast<__m256i*>(o + 128), _mm256_permute2x128_si256(u[e], u[4 + e], 0x31));  // 8c + 4 + e
    }
  }
}

/// Fills the scratch of rows [0, nr) of block b (nr <= 8); lanes past nr stay zero.
template <ggml_type T>
CV_AVX2 void prepare(const uint8_t* w, size_t row_bytes, int nr, int32_t b, uint8_t (*bytes)[256], uint8_t* s) {
  using L = layout<T>;
  constexpr size_t bb = kq::block_bytes_of(T);
  std::memset(s + L::sc, 0, L::bytes - L::sc);
  auto* sc = reinterpret_cast<int32_t*>(s + L::sc);
  for (int r = 0; r < nr; ++r) {
    const uint8_t* blk = w + row_bytes * static_cast<size_t>(r) + bb * static_cast<size_t>(b);
    prefetch_next<T>(blk);
    unpack_bytes<T>(blk, bytes[r]);
    row_scales<T, kRows>(blk, r, sc, reinterpret_cast<int16_t*>(s + L::pr), reinterpret_cast<float*>(s + L::d),
                         reinterpret_cast<float*>(s + L::dmin));
  }
  // madd needs each scale twice per lane: (sc, sc) as int16.
  for (int i = 0; i < kRows * L::ns; ++i) {
    const auto v = static_cast<uint32_t>(sc[i]) & 0xFFFFu;
    sc[i] = static_cast<int32_t>(v | (v << 16));
  }
  transpose(bytes, s + L::w);
}

CV_AVX2 inline __m256i bcast(const uint8_t* p) { return _mm256_set1_epi32(ld_i32(p)); }
CV_AVX2 inline __m256i ldy(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

/// Block b (scratch s) of one row group x tokens [t0, t0 + NT): acc[t] += kq_step lane-wise.
template <ggml_type T, int NT>
CV_AVX2 void tile(const qmm_job& j, const uint8_t* s, int32_t b, int32_t t0, float (*acc)[kRows]) {
  using L = layout<T>;
  const uint8_t* a[NT];
  const size_t ab = kq::q8k_bytes * static_cast<size_t>(b);
  for (int t = 0; t < NT; ++t) a[t] = j.act + j.act_stride * static_cast<size_t>(t0 + t) + ab;
  __m256i isum[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 1
  for (int sb = 0; sb < L::ns; ++sb) {
    __m256i w[L::gs];
#pragma GCC unroll 8
    for (int g = 0; g < L::gs; ++g) w[g] = ldy(s + L::w + 32 * static_cast<size_t>(L::gs * sb + g));
    const __m256i sc = ldy(s + L::sc + 32 * static_cast<size_t>(sb));
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const uint8_t* q = a[t] + kq::q8k_qs + 4 * static_cast<size_t>(L::gs * sb);
#pragma GCC unroll 4
      for (int h = 0; h < L::gs; h += L::hg) {
        __m256i x = _mm256_maddubs_epi16(w[h], bcast(q + 4 * h));
#pragma GCC unroll 8
        for (int g = h + 1; g < h + L::hg; ++g) x = _mm256_add_epi16(x, _mm256_maddubs_epi16(w[g], bcast(q + 4 * g)));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(x, sc));
      }
    }
  }
  const __m256 d = _mm256_load_ps(reinterpret_cast<const float*>(s + L::d));
  const __m256 dmin = _mm256_load_ps(reinterpret_cast<const float*>(s + L::dmin));
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    const uint8_t* bs = a[t] + kq::q8k_bsums;
    __m256i pm = _mm256_madd_epi16(ldy(s + L::pr), bcast(bs));
#pragma GCC unroll 8
    for (int i = 1; i < 8; ++i) pm = _mm256_add_epi32(pm, _mm256_madd_epi16(ldy(s + L::pr + 32 * static_cast<size_t>(i)), bcast(bs + 4 * i)));
    const __m256 da = _mm256_set1_ps(kq::load_f32(a[t]));
    __m256 v = _mm256_load_ps(acc[t0 + t]);
    if constexpr (T == ggml_type::q6_k) {
      v = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(_mm256_add_epi32(isum[t], pm)), v);
    } else {
      v = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[t]), v);
      v = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(pm), v);
    }
    _mm256_store_ps(acc[t0 + t], v);
  }
}

/// Rows [r0, r0 + nr) of every token from the accumulators.
CV_AVX2 void store_rows(const qmm_job& j, int32_t r0, int nr, float (*acc)[kRows]) {
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int32_t t = 0; t < j.m; ++t) {
    float* c = j.c + static_cast<size_t>(t) * j.ldc + r0;
    __m256 v = _mm256_load_ps(acc[t]);
    if (j.accumulate) v = _mm256_add_ps(_mm256_maskload_ps(c, mask), v);
    _mm256_maskstore_ps(c, mask, v);
  }
}

template <ggml_type T> CV_AVX2 void run(const qmm_job& j) {
  using tile_fn = void (*)(const qmm_job&, const uint8_t*, int32_t, int32_t, float (*)[kRows]);
  static constexpr tile_fn tiles[kTokens] = {tile<T, 1>, tile<T, 2>, tile<T, 3>, tile<T, 4>};
  rl_run<kRows, kTokens, kq::wide_groups, layout<T>::bytes>(j, prepare<T>, tiles, store_rows);
}

} // namespace

CV_AVX2 void qmm_kquant_avx2_wide(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_k: return run<ggml_type::q4_k>(j);
    case ggml_type::q5_k: return run<ggml_type::q5_k>(j);
    case ggml_type::q6_k: return run<ggml_type::q6_k>(j);
    default: return;
  }
}

} // namespace conveyor::model

#endif // x86
