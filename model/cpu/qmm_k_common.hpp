// Shared by the K-quant qmm kernels (qmm_k_scalar/avx2/avx512.cpp) and their test: the Q8_K
// activation layout, the weight block geometry, the 6-bit scale unpacking, and THE per-block
// float step. Internal; not part of qmm.hpp.
//
// Every kernel reduces a (weight row r, token t, 256-block b) triple to exact int32 sums and then
// runs kq_step(): the same IEEE operations in the same order on every ISA and in every tile, so
// results are batch invariant and in fact bit-identical across scalar, AVX2 and AVX-512.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "model/cpu/qmm.hpp"
#include "model/formats/dequant.hpp"
#include "model/formats/ggml_type.hpp"

namespace conveyor::model::kq {

/// Q8_K block (ggml's block_q8_K): f32 d | int8 qs[256] | int16 bsums[16] (sum of qs[16i..16i+15]).
inline constexpr size_t q8k_bytes = 292;
inline constexpr size_t q8k_qs = 4;
inline constexpr size_t q8k_bsums = 260;

/// How far ahead of the block being read the SIMD kernels prefetch each weight row (bytes).
/// NOTE: prefetching past the end of a row is harmless (prefetches never fault).
inline constexpr size_t prefetch_bytes = 1024;
/// Rows per chunk: a chunk's weights stay in L2 while every token group of 8 passes over them.
inline constexpr int32_t row_chunk = 32;

/// Weight block bytes: Q4_K 144, Q5_K 176, Q6_K 210.
constexpr size_t block_bytes_of(ggml_type t) {
  return t == ggml_type::q4_k ? 144 : t == ggml_type::q5_k ? 176 : 210;
}

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline int16_t load_i16(const uint8_t* p) {
  int16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return fp16_to_fp32(h);
}

/// Q4_K / Q5_K packed scales[12] -> 8 six-bit scales (bytes of *sc) and 8 mins (bytes of *mn),
/// sub-block j in byte j (ggml's get_scale_min_k4, four at a time).
inline void unpack_scales(const uint8_t* q, uint64_t* sc, uint64_t* mn) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t sc_lo = a & 0x3F3F3F3Fu, mn_lo = b & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = mn_lo | (static_cast<uint64_t>(mn_hi) << 32);
}

/// The float step of one block: acc + (dw*da)*isum - (dmin*da)*msum, as two fused multiply-adds
/// (no expression the compiler could contract differently). isum = sum_j sc_j * dot_j; msum =
/// sum_j min_j * (sum of the token's 32 values of sub-block j); Q6_K passes dmin = 0, msum = 0
/// and skips the second step (has_min = false).
template <bool has_min> inline float kq_step(float acc, float dw, float dmin, float da, int32_t isum, int32_t msum) {
  acc = std::fma(dw * da, static_cast<float>(isum), acc);
  if constexpr (has_min) acc = std::fma(-(dmin * da), static_cast<float>(msum), acc);
  return acc;
}

} // namespace conveyor::model::kq

namespace conveyor::model::kq {

/// Per (token group of <= 8, block) data for the SIMD tiles, 160 bytes: the tokens' d (f32[8],
/// zero past the group) and, for the Q4_K/Q5_K mins, the 32-element sums as int16 pairs
/// bsp[jp][2t + i] = sum of the token t's sub-block 2jp+i (int16[4][16]).
inline constexpr size_t meta_bytes = 160;

/// Fills meta for tokens [t0, t0 + nt) of act (nt <= 8), nb blocks.
inline void build_meta(const uint8_t* act, size_t stride, int32_t t0, int32_t nt, int32_t nb, uint8_t* meta) {
  std::memset(meta, 0, meta_bytes * static_cast<size_t>(nb));
  for (int32_t t = 0; t < nt; ++t) {
    const uint8_t* a = act + static_cast<size_t>(t0 + t) * stride;
    for (int32_t b = 0; b < nb; ++b, a += q8k_bytes) {
      uint8_t* mb = meta + meta_bytes * static_cast<size_t>(b);
      std::memcpy(mb + 4 * t, a, 4);
      for (int s = 0; s < 8; ++s) {
        const auto v = static_cast<int16_t>(load_i16(a + q8k_bsums + 4 * s) + load_i16(a + q8k_bsums + 4 * s + 2));
        std::memcpy(mb + 32 + 32 * (s / 2) + 2 * (2 * t + s % 2), &v, 2);
      }
    }
  }
}

} // namespace conveyor::model::kq

namespace conveyor::model {

namespace kq {
/// AVX2 steps of at most this many tokens take the small-step kernel (qmm_k_avx2_small.cpp; the
/// AVX-512 kernel uses it for m = 1, and m = 2 of Q4_K/Q5_K): 8 weight rows per tile, the float
/// step vectorised across the rows.
inline constexpr int32_t small_m = 4;
/// Steps of at least this many tokens take the row-lane kernels (qmm_k_avx512_wide.cpp,
/// qmm_k_avx2_wide.cpp): 16 (8) rows unpacked once per call into a row-interleaved scratch that
/// every token then reuses.
/// qmm-k-bench on Llama-3-8B shapes (best of 3-5, one thread): AVX-512 even with its tiles at
/// m = 16 and 10-40% ahead at 24; AVX2 1.2-1.75x ahead at 16, no better at 8.
inline constexpr int32_t wide_m = 16;
/// False when CONVEYOR_KQ_WIDE=0 is in the environment: long steps stay on the tiles (A/B runs).
inline bool wide_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("CONVEYOR_KQ_WIDE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}
/// Row groups a row-lane kernel prepares per block before its token tiles pass over them
/// (qmm_k_rowlane.hpp's rl_run): 4, or CONVEYOR_KQ_WIDE_GROUPS=1..4 (A/B runs; 1 = a group at a
/// time, as before).
inline constexpr int wide_groups = 4;
inline int wide_groups_used() {
  static const int g = [] {
    const char* v = std::getenv("CONVEYOR_KQ_WIDE_GROUPS");
    const int n = v ? std::atoi(v) : wide_groups;
    return n < 1 ? 1 : n > wide_groups ? wide_groups : n;
  }();
  return g;
}
} // namespace kq

#if defined(__x86_64__) || defined(__i386__)
/// Small steps (1 <= m <= kq::small_m) of qmm_kquant_avx2 / qmm_kquant_avx512: the same bits.
void qmm_kquant_avx2_small(const qmm_job& j);
/// Long steps (m >= kq::wide_m) of qmm_kquant_avx512 / qmm_kquant_avx2: the same bits.
void qmm_kquant_avx512_wide(const qmm_job& j);
void qmm_kquant_avx2_wide(const qmm_job& j);
#endif

} // namespace conveyor::model
