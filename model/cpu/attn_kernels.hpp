// The CPU attention's products (paged_kv::attend): scores with keys in lanes, and P · V.
//
// Scores with keys in lanes: the CPU KV cache keeps each block's K transposed (for a kv
// head, head_dim rows of block_size slots), so a vector holds one dimension of W consecutive keys
// and a query's scores against them are one FMA chain over the head's dimensions:
//
//   s[j] = (fma(q[hd-1], k[hd-1][j], ... fma(q[1], k[1][j], fma(q[0], k[0][j], 0)))) * scale
//
// That order is the definition: a key's score depends only on the query and that key, never on
// W (16 with AVX-512, 8 with AVX2, 1 in the scalar path), on how many queries or keys one call
// takes, or on the ISA, so every path gives the same bits (tests/unit/model/paged_kv_attend_test.cpp).
// No horizontal sums: each lane is its own key's sum.
#pragma once

#include <cstdint>

#include "model/cpu/qmm.hpp"

namespace conveyor::model {

/// Keys per vector for a cache of `block_size` slots on `isa`: 16 (AVX-512) or 8 (AVX2) when
/// that many divide the block (a chunk of lanes never crosses a block), else 1 (scalar).
int32_t score_lanes(cpu_isa isa, int32_t block_size);

/// Scores of `nq` queries (q: nq * hd floats, query i at q + i * hd) against `n_chunks` chunks
/// of `lanes` keys each (lanes from score_lanes): chunk c's dimension d is at chunk[c] + d *
/// stride, and its keys' scores go to s + i * s_stride + pos[c] .. + lanes - 1 for query i (every
/// lane is written: the caller's rows have room for them). T: uint16_t (IEEE half, widened
/// exactly by F16C) or float.
template <class T>
void score_chunks(cpu_isa isa, int32_t lanes, const T* const* chunk, const int32_t* pos, int32_t n_chunks, int64_t stride,
                  int32_t hd, const float* q, int32_t nq, float scale, float* s, int64_t s_stride);

/// P · V over one block's rows: out[e] += p[r] * v_r[e] for r = 0 .. len - 1 in order, one FMA
/// chain per element (v_r at vb + r * stride, n elements; the head's dimensions in lanes, 8 a
/// vector: AVX2 on every host, since 16-lane AVX-512 chains were slower, docs/benchmarks.md).
template <class T>
void accumulate_pv(const float* p, const T* vb, int64_t stride, int32_t len, float* out, int32_t n);

/// accumulate_pv for `nq` queries over the same rows (query i: weights p[i], output out[i]), the
/// same bits: up to three at a time share each V vector's load (and widening) and each row's
/// broadcasts, so f16 rows need no f32 copy.
template <class T>
void accumulate_pv_group(const float* const* p, int32_t nq, const T* vb, int64_t stride, int32_t len, float* const* out,
                         int32_t n);

} // namespace conveyor::model
