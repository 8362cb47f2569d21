// AVX2/FMA/F16C legacy qmm kernel (qmm_kernels.hpp). Tiles of R weight rows x N tokens keep
// R*N 8-lane f32 accumulators in registers; each weight block is unpacked once per tile and each
// activation block loaded once per tile. Quantized types: u8 x s8 maddubs + madd give 8 exact
// int32 lanes per block, then acc = fma(float(lanes), d_w * d_a, acc). Signed-weight types use
// unsigned weights (Q4_0 q, Q5_0 q) with the offset (8 / 16 * a) removed per token before madd,
// and Q8_0 uses the |w| / sign(a, w) trick. Q4_1 / Q5_1 add sum_b m_w[b] * s_a[b] (8 lanes over
// blocks) before the horizontal sum.
// Packed rows (qmm_pack_rows for avx2, P = true) keep each group of 8 blocks' bytes as the G
// blocks' qs, then Q5's G qh dwords, the G f16 scales and Q4_1 / Q5_1's G f16 mins, so that a
// row tile's scales convert 8 at a time (prepare) instead of one by one.
// NOTE: batch invariance: every (row, token) pair runs the same float operations in the same
// lane arrangement whatever the tile, packed or not, so R, N and P change speed only. Compiled
// with target attributes: qmm_run() checks the CPU first.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "model/cpu/qmm_kernels.hpp"

#define CV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace conveyor::model {
namespace {

constexpr int kRows = 2;     // tile rows for m > 1
constexpr int kToks = 4;     // tile tokens for m > 1
constexpr int kRowsM1 = 4;   // tile rows for m == 1 (F types: 8)
constexpr int kRowsMax = 8;
constexpr int kChunk = 64;   // tokens per pass over the weights: their activations stay in L2
constexpr int kPrefetchRows = 8;  // m == 1: rows ahead that the tile prefetches

struct blk_layout { int bytes, m, qh, qs, off; };  // byte offsets (-1: absent); off: weight centre
template <ggml_type T> constexpr blk_layout layout() {
  switch (T) {
    case ggml_type::q4_0: return {18, -1, -1, 2, 8};
    case ggml_type::q4_1: return {20, 2, -1, 4, 0};
    case ggml_type::q5_0: return {22, -1, 2, 6, 16};
    case ggml_type::q5_1: return {24, 2, 4, 8, 0};
    default: return {34, -1, -1, 2, 0};  // q8_0
  }
}

/// One row tile: its rows, and for quantized types their f32 block scales and mins (each row's
/// mins zero-padded to a multiple of 8 blocks).
struct rows_ctx {
  int32_t r0;  // row index of w[0]
  const uint8_t* w[kRowsMax];
  const float* d[kRowsMax];  // block scales of each row
  const float* m[kRowsMax];
};

/// Bytes of one block's qs in the packed layout, and where block j of a group of G starts.
template <ggml_type T> constexpr int packed_qs() { return T == ggml_type::q8_0 ? 32 : 16; }

#define QMM_TARGET CV_AVX2
#include "model/cpu/qmm_f_tile.hpp"  // hsum, store, the F32/F16/BF16 tiles
#undef QMM_TARGET

/// Byte i of the result is 0x10 when bit i of the 32-bit little-endian qh at p is set.
CV_AVX2 inline __m256i fifth_bits(const uint8_t* p) {
  uint32_t qh;
  std::memcpy(&qh, p, sizeof qh);
  const __m256i idx = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), idx);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel), _mm256_set1_epi8(0x10));
}

/// The 32 weights of a block (its qs and qh bytes) in element order: u8 (4/5-bit types) or s8 (Q8_0).
template <ggml_type T> CV_AVX2 inline __m256i unpack(const uint8_t* qs, const uint8_t* qh) {
  if constexpr (T == ggml_type::q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  } else {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i sh = _mm256_set_epi32(4, 4, 4, 4, 0, 0, 0, 0);  // high lane: high nibbles
    __m256i v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_broadcastsi128_si256(q), sh), _mm256_set1_epi8(0x0F));
    if constexpr (layout<T>().qh >= 0) v = _mm256_or_si256(v, fifth_bits(qh));
    return v;
  }
}

/// Block b0 + j of a row (b0 a multiple of 8, G blocks in its group): its qs and qh bytes.
template <ggml_type T, bool P>
CV_AVX2 inline __m256i unpack_at(const uint8_t* row, int32_t b0, int j, int G) {
  constexpr blk_layout L = layout<T>();
  if constexpr (P) {
    const uint8_t* g = row + static_cast<size_t>(b0) * L.bytes;
    return unpack<T>(g + packed_qs<T>() * j, g + packed_qs<T>() * G + 4 * j);
  } else {
    const uint8_t* p = row + static_cast<size_t>(b0 + j) * L.bytes;
    return unpack<T>(p + L.qs, p + L.qh);
  }
}

template <ggml_type T> constexpr bool is_float() {
  return T == ggml_type::f32 || T == ggml_type::f16 || T == ggml_type::bf16;
}

/// + sum_b m_w[b] * s_a[b] in 8 lanes (lane b % 8), the tail through a masked load.
CV_AVX2 inline __m256 min_terms(const float* m, const float* s, int32_t nb) {
  __m256 mm = _mm256_setzero_ps();
  int32_t b = 0;
  for (; b + 8 <= nb; b += 8) mm = _mm256_fmadd_ps(_mm256_loadu_ps(m + b), _mm256_loadu_ps(s + b), mm);
  if (b < nb) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nb - b), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    mm = _mm256_fmadd_ps(_mm256_loadu_ps(m + b), _mm256_maskload_ps(s + b, mask), mm);
  }
  return mm;
}

template <ggml_type T, bool P, int R, int N>
CV_AVX2 void tile_q(const qmm_job& j, const rows_ctx& rc, int ri, int32_t t0) {
  constexpr blk_layout L = layout<T>();
  const int32_t nb = j.k / 32;
  const uint8_t* a[N];
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) a[t] = j.act + static_cast<size_t>(t0 + t) * j.act_stride;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][N];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) acc[r][t] = _mm256_setzero_ps();
  const size_t pf = static_cast<size_t>(kPrefetchRows) * j.w_row_bytes;
  for (int32_t b = 0; b < nb; ++b) {
    const int32_t b0 = b & ~7;
    if (N == 1 && b == b0)  // m == 1: the rows a few tiles ahead (a step's row chunks are short streams)
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        for (int l = 0; l < 8 * L.bytes; l += 64)
          _mm_prefetch(reinterpret_cast<const char*>(rc.w[ri + r] + pf + static_cast<size_t>(b0) * L.bytes + l), _MM_HINT_T0);
    const int G = std::min<int32_t>(8, nb - b0);
    __m256i w[R], wabs[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      w[r] = unpack_at<T, P>(rc.w[ri + r], b0, b - b0, G);
      if constexpr (T == ggml_type::q8_0) wabs[r] = _mm256_sign_epi8(w[r], w[r]);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t] + 32 * static_cast<size_t>(b)));
      const __m256 da = _mm256_broadcast_ss(reinterpret_cast<const float*>(a[t] + 32 * static_cast<size_t>(nb)) + b);
      __m256i corr = _mm256_setzero_si256();
      if constexpr (L.off != 0) corr = _mm256_maddubs_epi16(_mm256_set1_epi8(L.off), av);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256i p16;
        if constexpr (T == ggml_type::q8_0) p16 = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(av, w[r]));
        else if constexpr (L.off != 0) p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(w[r], av), corr);
        else p16 = _mm256_maddubs_epi16(w[r], av);
        const __m256 sc = _mm256_mul_ps(_mm256_broadcast_ss(rc.d[ri + r] + b), da);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones)), sc, acc[r][t]);
      }
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < N; ++t) {
    const float* s = reinterpret_cast<const float*>(a[t] + 36 * static_cast<size_t>(nb));
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 v = acc[r][t];
      if constexpr (L.m >= 0) v = _mm256_add_ps(v, min_terms(rc.m[ri + r], s, nb));
      store(j, t0 + t, rc.r0 + ri + r, hsum(v));
    }
  }
}

using tile_fn = void (*)(const qmm_job&, const rows_ctx&, int, int32_t);

template <ggml_type T> constexpr int rows_m1() { return is_float<T>() ? 8 : kRowsM1; }

template <ggml_type T, bool P, int R, int N> constexpr tile_fn pick() {
  if constexpr (R > kRows && N > 1) return nullptr;  // never used: wide tiles only at m == 1
  else if constexpr (is_float<T>()) return &tile_f<T, R, N>;
  else return &tile_q<T, P, R, N>;
}

template <ggml_type T, bool P, size_t... I>
constexpr std::array<tile_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{pick<T, P, static_cast<int>(I) / kToks + 1, static_cast<int>(I) % kToks + 1>()...}};
}

/// Fills rc's scales for rows r0 .. r0+rn (quantized types); buf holds them: row i's scales at
/// nbp * i, its mins (zero past nb) at nbp * (kRowsMax + i).
template <ggml_type T, bool P>
CV_AVX2 void prepare(const qmm_job& j, rows_ctx& rc, int32_t r0, int rn, std::vector<float>& buf) {
  rc.r0 = r0;
  for (int i = 0; i < rn; ++i) rc.w[i] = j.w + static_cast<size_t>(r0 + i) * j.w_row_bytes;
  if constexpr (!is_float<T>()) {
    constexpr blk_layout L = layout<T>();
    const int32_t nb = j.k / 32, nbp = (nb + 7) & ~7;
    buf.resize(2 * static_cast<size_t>(kRowsMax) * nbp);
    for (int i = 0; i < rn; ++i) {
      float* d = buf.data() + static_cast<size_t>(nbp) * i;
      float* m = buf.data() + static_cast<size_t>(nbp) * (kRowsMax + i);
      const uint8_t* row = rc.w[i];
      if constexpr (P) {  // G halves at a time: 8 scales (mins) in one conversion
        for (int32_t b0 = 0; b0 < nb; b0 += 8) {
          const int G = std::min<int32_t>(8, nb - b0);
          const uint8_t* h = row + static_cast<size_t>(b0) * L.bytes + packed_qs<T>() * G + (L.qh >= 0 ? 4 * G : 0);
          if (G == 8) {
            _mm256_storeu_ps(d + b0, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
            if constexpr (L.m >= 0) _mm256_storeu_ps(m + b0, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 16))));
            continue;
          }
          for (int b = 0; b < 8; ++b) {  // the tail group: mins past nb stay zero
            uint16_t hd = 0, hm = 0;
            if (b < G) {
              std::memcpy(&hd, h + 2 * b, 2);
              if constexpr (L.m >= 0) std::memcpy(&hm, h + 2 * G + 2 * b, 2);
            }
            d[b0 + b] = _cvtsh_ss(hd);
            m[b0 + b] = _cvtsh_ss(hm);
          }
        }
      } else {
        const uint8_t* p = row;
        for (int32_t b = 0; b < nb; ++b, p += L.bytes) {
          uint16_t h;
          std::memcpy(&h, p, 2);
          d[b] = _cvtsh_ss(h);
          if constexpr (L.m >= 0) {
            std::memcpy(&h, p + L.m, 2);
            m[b] = _cvtsh_ss(h);
          }
        }
        for (int32_t b = nb; b < nbp; ++b) m[b] = 0.0f;
      }
      rc.d[i] = d;
      rc.m[i] = m;
    }
  }
}

template <ggml_type T, bool P> CV_AVX2 void run(const qmm_job& j) {
  static constexpr auto table = make_table<T, P>(std::make_index_sequence<kRowsMax * kToks>{});
  thread_local std::vector<float> buf;
  const int rt = j.m == 1 ? rows_m1<T>() : kRows, nt = j.m == 1 ? 1 : kToks;
  rows_ctx rc{};
  for (int32_t tc = 0; tc < j.m; tc += kChunk) {
    const int32_t te = std::min(j.m, tc + kChunk);
    for (int32_t r0 = 0; r0 < j.n_rows; r0 += rt) {
      const int rn = std::min(rt, j.n_rows - r0);
      prepare<T, P>(j, rc, r0, rn, buf);
      for (int32_t t0 = tc; t0 < te; t0 += nt) {
        const int tn = std::min(nt, te - t0);
        table[static_cast<size_t>((rn - 1) * kToks + tn - 1)](j, rc, 0, t0);
      }
    }
  }
}

template <ggml_type T> void run_q(const qmm_job& j) { return j.packed ? run<T, true>(j) : run<T, false>(j); }

/// The packed layout of one group of G blocks (the header comment), G * bytes bytes.
template <ggml_type T> void pack_group(const uint8_t* p, int G, uint8_t* out) {
  constexpr blk_layout L = layout<T>();
  constexpr int qsz = packed_qs<T>();
  uint8_t* o = out;
  for (int b = 0; b < G; ++b, o += qsz) std::memcpy(o, p + static_cast<size_t>(b) * L.bytes + L.qs, qsz);
  if constexpr (L.qh >= 0)
    for (int b = 0; b < G; ++b, o += 4) std::memcpy(o, p + static_cast<size_t>(b) * L.bytes + L.qh, 4);
  for (int b = 0; b < G; ++b, o += 2) std::memcpy(o, p + static_cast<size_t>(b) * L.bytes, 2);
  if constexpr (L.m >= 0)
    for (int b = 0; b < G; ++b, o += 2) std::memcpy(o, p + static_cast<size_t>(b) * L.bytes + L.m, 2);
}

template <ggml_type T> void pack_rows(const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst) {
  constexpr size_t bs = layout<T>().bytes;
  const int32_t nb = k / 32;
  const size_t rb = bs * static_cast<size_t>(nb);
  for (int32_t r = 0; r < rows; ++r)
    for (int32_t b0 = 0; b0 < nb; b0 += 8)
      pack_group<T>(src + rb * r + bs * b0, std::min<int32_t>(8, nb - b0), dst + rb * r + bs * b0);
}

} // namespace

void qmm_legacy_avx2(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::f32: return run<ggml_type::f32, false>(j);
    case ggml_type::f16: return run<ggml_type::f16, false>(j);
    case ggml_type::bf16: return run<ggml_type::bf16, false>(j);
    case ggml_type::q4_0: return run_q<ggml_type::q4_0>(j);
    case ggml_type::q4_1: return run_q<ggml_type::q4_1>(j);
    case ggml_type::q5_0: return run_q<ggml_type::q5_0>(j);
    case ggml_type::q5_1: return run_q<ggml_type::q5_1>(j);
    case ggml_type::q8_0: return run_q<ggml_type::q8_0>(j);
    default: return;
  }
}

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
