// Internal to the legacy qmm kernels (qmm_scalar.cpp, qmm_avx2_q.cpp, qmm_avx512_q.cpp): the
// "rows in lanes" layout of Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 and the one float order every path keeps.
//
// The order, per (weight row, token), the scalar kernel's loop: acc = 0; for each 32-block b in
// order, isum = the exact integer dot of the block; acc = fma(float(isum), d_w * d_a, acc); and
// for Q4_1 / Q5_1 acc = fma(m_w, s_a, acc). No horizontal sum, so SIMD kernels that put rows
// in lanes (lane r of a vector = row r) take the same steps lane by lane, at any step size,
// tile or ISA: every kernel gives the scalar kernel's bits.
//
// The packed layout (qmm_pack_rows, once at load; the same for AVX2 and AVX-512): rows in
// groups of 16 from the first row of the matrix, the last group short (R = rows % 16 lanes)
// when the rows do not divide. A group of L lanes keeps its L * row_bytes bytes, block by block
// (block b at b * L * block_bytes), and inside a block, section by section:
//   qs:  V vectors (Q8_0: 8, else 4) of L dwords: vector i lane r = qs bytes 4i..4i+3 of row r
//        (Q4/Q5: low nibbles are elements 4i..4i+3, high nibbles 16+4i..; Q8_0: elements 4i..)
//   qh:  Q5_0 / Q5_1: L dwords, row r's high bits
//   d:   L f16 scales
//   m:   Q4_1 / Q5_1: L f16 mins
// So weight vector i pairs with the activation's dword i (Q4/Q5: the high nibbles of vector i
// are vector 4 + i, pairing with dword 4 + i), broadcast to every lane.
// A job on packed rows starts at a group (a multiple of 16 rows from the matrix's first row)
// and, when its row count is not a multiple of 16, ends at the matrix's last row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/cpu/qmm.hpp"
#include "model/formats/ggml_type.hpp"

namespace conveyor::model::qmmrl {

constexpr int kLanes = 16;  // rows per packed group

/// Geometry of a legacy block type: bytes, qs vectors, has qh, has a min, qs/qh/m offsets in
/// the raw block, and the weight centre (Q4_0: q - 8, Q5_0: q - 16; 0 otherwise).
struct geom {
  int bytes, vecs;
  bool qh, min;
  int raw_qs, raw_qh, raw_m, off;
};
constexpr geom geom_of(ggml_type t) {
  switch (t) {
    case ggml_type::q4_0: return {18, 4, false, false, 2, -1, -1, 8};
    case ggml_type::q4_1: return {20, 4, false, true, 4, -1, 2, 0};
    case ggml_type::q5_0: return {22, 4, true, false, 6, 2, -1, 16};
    case ggml_type::q5_1: return {24, 4, true, true, 8, 4, 2, 0};
    default: return {34, 8, false, false, 2, -1, -1, 0};  // q8_0
  }
}
/// Section offsets inside a block of a group of L lanes.
constexpr size_t qh_at(const geom& g, int L) { return static_cast<size_t>(4 * g.vecs * L); }
constexpr size_t d_at(const geom& g, int L) { return qh_at(g, L) + (g.qh ? 4 * static_cast<size_t>(L) : 0); }
constexpr size_t m_at(const geom& g, int L) { return d_at(g, L) + 2 * static_cast<size_t>(L); }

/// Packs R rows (raw blocks, row_bytes apart, nb blocks each) into a group of L >= R lanes at
/// dst (nb * L * bytes); lanes R..L-1 are zero.
void pack_group(ggml_type t, const uint8_t* src, size_t row_bytes, int R, int L, int32_t nb, uint8_t* dst);
/// Copies a packed group of R lanes (nb blocks) into the 16-lane layout at dst, lanes R..15 zero.
void widen_group(ggml_type t, const uint8_t* src, int R, int32_t nb, uint8_t* dst);
/// Where a tile reads its tokens and writes its outputs.
struct tile_io {
  const uint8_t* act;   ///< the first token's activation row (q8_0 / q8_1)
  size_t astride;
  const int32_t* corr;  ///< the first token's corrections (nb per token), or null
  int32_t nb;
  float* c;             ///< output of (first token, first row of the group)
  int32_t ldc;
  bool accumulate;
};
/// A kernel's tile: groups of 16 lanes from w (gbytes apart when it takes several) x its tokens.
using tile_fn = void (*)(const uint8_t* w, size_t gbytes, const tile_io& io);

/// The loop both SIMD kernels share: corrections (off != 0), then every 16-row group of the job
/// against the tokens in equal passes of up to `pass` (tiles[n - 1] takes n tokens); raw rows
/// and a packed part's short last group through a 16-lane scratch group, their outputs copied
/// out lane by lane. pair1, when set, takes two packed groups at a time at one token.
void run_groups(const qmm_job& j, int32_t off, int32_t pass, const tile_fn* tiles, tile_fn pair1);

/// corr[b] = -off * (sum of block b's 32 activation qs): the integer term that centres unsigned
/// weights (off: 8 for Q4_0, 16 for Q5_0, 128 for Q8_0 read as w + 128).
void corrections(const uint8_t* act_qs, int32_t nb, int32_t off, int32_t* corr);

} // namespace conveyor::model::qmmrl
