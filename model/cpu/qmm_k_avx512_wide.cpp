// AVX-512 VNNI K-quant qmm for long steps (m >= kq::wide_m tokens: prompt chunks, big batches).
// Lanes are weight rows, not elements: 16 rows' blocks are unpacked once per call into a
// row-interleaved scratch (zmm i of a block holds elements 4i..4i+3 of each of the 16 rows, as
// unsigned bytes), and every token then runs vpdpbusd against it with its own 4 activation bytes
// broadcast from the Q8_K block as stored. A sub-block's dot is therefore already a per-row int32
// in its lane: times the row's scale (vpmulld), summed over the sub-blocks, and the mins (or
// Q6_K's -32 offset) come from vpdpwssd of per-row int16 pairs with the token's bsums. No
// horizontal reduction is left: a 16-row x 8-token tile is dpbusd work plus one vpmulld and two
// adds per sub-block and token, where the element-lane tiles of qmm_k_avx512.cpp spend more than
// half their instructions permuting and reducing. Per (row, token, block) the integer sums are exact and the float step is kq_step()
// (lane-wise, rows in lanes), so the bits equal qmm_kquant_scalar's: batch invariance holds
// whichever kernel a step size picks.
#if defined(__x86_64__) || defined(__i386__)

// NOTE: GCC 12's AVX-512 headers self-initialise their "undefined" vectors (GCC PR105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <vector>

#include "model/cpu/qmm_k_common.hpp"

#define CV_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace conveyor::model {
namespace {

constexpr int kRows = 16;    // rows per scratch group (one zmm lane each)
constexpr int kTokens = 8;   // tokens per tile

/// Scratch bytes of one (16-row group, block): W[64] zmm of bytes | SC[ns] int32 per row | PR[8]
/// int16 pairs per row (Q4_K/Q5_K: (min_j, min_j); Q6_K: (-32 sc_2i, -32 sc_2i+1)) | D | DMIN.
template <ggml_type T> struct layout {
  static constexpr int ns = T == ggml_type::q6_k ? 16 : 8;  // sub-blocks (scales) per block
  static constexpr int gs = 64 / ns;                        // 4-byte groups per sub-block
  static constexpr size_t w = 0, sc = 4096, pr = sc + 64 * ns, d = pr + 512, dmin = d + 64, bytes = dmin + 64;
};

#define QMM_TARGET CV_AVX512
#include "model/cpu/qmm_k_rowlane.hpp"
#undef QMM_TARGET

/// out zmm i (i < 64) = dword i of each of the 16 rows of `bytes`: four 16 x 16 dword
/// transposes (unpack 32, unpack 64, then a 4 x 4 transpose of 128-bit lanes).
CV_AVX512 inline void transpose(const uint8_t (*bytes)[256], uint8_t* out) {
  for (int c = 0; c < 4; ++c) {
    __m512i t[16], u[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m512i a = _mm512_load_si512(bytes[2 * k] + 64 * c), b = _mm512_load_si512(bytes[2 * k + 1] + 64 * c);
      t[2 * k] = _mm512_unpacklo_epi32(a, b);
      t[2 * k + 1] = _mm512_unpackhi_epi32(a, b);
    }
    // u[4k + e], 128-bit lane L: dword 4L + e of rows 4k..4k+3.
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
      u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
      u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
      u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
#pragma GCC unroll 4
    for (int e = 0; e < 4; ++e) {
      const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44), v1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xEE);
      const __m512i v2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xEE);
      uint8_t* o = out + 64 * static_cast<size_t>(16 * c + e);
      _mm512_store_si512(o, _mm512_shuffle_i32x4(v0, v2, 0x88));        // dword 16c + e
      _mm512_store_si512(o + 256, _mm512_shuffle_i32x4(v0, v2, 0xDD));  // 16c + 4 + e
      _mm512_store_si512(o + 512, _mm512_shuffle_i32x4(v1, v3, 0x88));  // 16c + 8 + e
      _mm512_store_si512(o + 768, _mm512_shuffle_i32x4(v1, v3, 0xDD));  // 16c + 12 + e
    }
  }
}

/// Fills the scratch of rows [0, nr) of block b (nr <= 16); lanes past nr stay zero.
/// `bytes` holds the unpacked rows (rows past nr zero).
template <ggml_type T>
CV_AVX512 void prepare(const uint8_t* w, size_t row_bytes, int nr, int32_t b, uint8_t (*bytes)[256], uint8_t* s) {
  using L = layout<T>;
  constexpr size_t bb = kq::block_bytes_of(T);
  std::memset(s + L::sc, 0, L::bytes - L::sc);
  auto* sc = reinterpret_cast<int32_t*>(s + L::sc);
  auto* pr = reinterpret_cast<int16_t*>(s + L::pr);
  auto* d = reinterpret_cast<float*>(s + L::d);
  auto* dmin = reinterpret_cast<float*>(s + L::dmin);
  for (int r = 0; r < nr; ++r) {
    const uint8_t* blk = w + row_bytes * static_cast<size_t>(r) + bb * static_cast<size_t>(b);
    prefetch_next<T>(blk);
    unpack_bytes<T>(blk, bytes[r]);
    row_scales<T, kRows>(blk, r, sc, pr, d, dmin);
  }
  transpose(bytes, s + L::w);
}

/// Block b (scratch s) of one row group x tokens [t0, t0 + NT): acc[t] += kq_step lane-wise.
template <ggml_type T, int NT>
CV_AVX512 void tile(const qmm_job& j, const uint8_t* s, int32_t b, int32_t t0, float (*acc)[kRows]) {
  using L = layout<T>;
  const uint8_t* a[NT];
  const size_t ab = kq::q8k_bytes * static_cast<size_t>(b);
  for (int t = 0; t < NT; ++t) a[t] = j.act + j.act_stride * static_cast<size_t>(t0 + t) + ab;
  __m512i isum[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
  for (int sb = 0; sb < L::ns; ++sb) {
    __m512i w[L::gs];
#pragma GCC unroll 8
    for (int g = 0; g < L::gs; ++g) w[g] = _mm512_load_si512(s + L::w + 64 * static_cast<size_t>(L::gs * sb + g));
    const __m512i sc = _mm512_load_si512(s + L::sc + 64 * static_cast<size_t>(sb));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const uint8_t* q = a[t] + kq::q8k_qs + 4 * static_cast<size_t>(L::gs * sb);
      __m512i x = _mm512_setzero_si512(), y = _mm512_setzero_si512();  // two chains: dpbusd's latency
#pragma GCC unroll 8
      for (int g = 0; g < L::gs; g += 2) {
        x = _mm512_dpbusd_epi32(x, w[g], _mm512_set1_epi32(ld_i32(q + 4 * g)));
        y = _mm512_dpbusd_epi32(y, w[g + 1], _mm512_set1_epi32(ld_i32(q + 4 * g + 4)));
      }
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(x, y), sc));
    }
  }
  const __m512 d = _mm512_load_ps(s + L::d), dmin = _mm512_load_ps(s + L::dmin);
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    const uint8_t* bs = a[t] + kq::q8k_bsums;
    __m512i pm = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      pm = _mm512_dpwssd_epi32(pm, _mm512_load_si512(s + L::pr + 64 * static_cast<size_t>(i)), _mm512_set1_epi32(ld_i32(bs + 4 * i)));
    const __m512 da = _mm512_set1_ps(kq::load_f32(a[t]));
    // (maskz_cvtepi32_ps with all lanes: the plain intrinsic's "undefined" source trips GCC 12's
    // -Wuninitialized, PR105593; same instruction and result.)
    __m512 v = _mm512_load_ps(acc[t0 + t]);
    if constexpr (T == ggml_type::q6_k) {
      v = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_add_epi32(isum[t], pm)), v);
    } else {
      v = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_maskz_cvtepi32_ps(0xFFFF, isum[t]), v);
      v = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, da), _mm512_maskz_cvtepi32_ps(0xFFFF, pm), v);
    }
    _mm512_store_ps(acc[t0 + t], v);
  }
}

/// Rows [r0, r0 + nr) of every token from the accumulators.
CV_AVX512 void store_rows(const qmm_job& j, int32_t r0, int nr, float (*acc)[kRows]) {
  const auto mask = static_cast<__mmask16>((1u << nr) - 1);
  for (int32_t t = 0; t < j.m; ++t) {
    float* c = j.c + static_cast<size_t>(t) * j.ldc + r0;
    __m512 v = _mm512_load_ps(acc[t]);
    if (j.accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, c), v);
    _mm512_mask_storeu_ps(c, mask, v);
  }
}

template <ggml_type T> CV_AVX512 void run(const qmm_job& j) {
  using tile_fn = void (*)(const qmm_job&, const uint8_t*, int32_t, int32_t, float (*)[kRows]);
  static constexpr tile_fn tiles[kTokens] = {tile<T, 1>, tile<T, 2>, tile<T, 3>, tile<T, 4>,
                                             tile<T, 5>, tile<T, 6>, tile<T, 7>, tile<T, 8>};
  rl_run<kRows, kTokens, kq::wide_groups, layout<T>::bytes>(j, prepare<T>, tiles, store_rows);
}

} // namespace

CV_AVX512 void qmm_kquant_avx512_wide(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_k: return run<ggml_type::q4_k>(j);
    case ggml_type::q5_k: return run<ggml_type::q5_k>(j);
    case ggml_type::q6_k: return run<ggml_type::q6_k>(j);
    default: return;
  }
}

} // namespace conveyor::model

#endif // x86
