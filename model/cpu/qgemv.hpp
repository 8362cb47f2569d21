// Fused "dequantize in registers, dot in f32" matrix products, the CPU executor's exact mode
// (cpu_matmul.hpp): C(m, n) = A(m, k) · W(n, k)^T (+ C) with W read as raw ggml blocks
// (qgemv_matrix.hpp). Weight values are bit-identical to dequantize_row()'s; activations stay
// f32 (never quantized), so results differ from an f32 GEMM over the dequantized matrix only in
// summation order, which is fixed per (row, token): batch-invariant. AVX2 reads F16 and the
// 32-element types in registers; F32, BF16 and the K-quants go through dequantize_row() per block.
#pragma once

#include <cstdint>

#include "model/cpu/qgemv_matrix.hpp"

namespace conveyor::model {

class spinning_pool;

/// Instruction set of a qgemv kernel.
enum class qgemv_isa {
  scalar,  ///< portable C++ (dequantize_row() per block, f32 dot)
  avx2,    ///< AVX2 + FMA + F16C
};

/// True when this CPU can run `isa` (checked with __builtin_cpu_supports).
bool qgemv_isa_available(qgemv_isa isa);
/// The fastest available ISA (avx2 where available, else scalar).
qgemv_isa qgemv_best_isa();

/// Output rows [r0, r1) of C(m, w.rows()) = A(m, w.k()) · W^T, plus C's old values when
/// `accumulate` (BLAS beta = 1). Rows of A and C are contiguous (lda = k, ldc = w.rows()).
/// Throws std::invalid_argument when `isa` is not available on this CPU.
void qgemv_rows(qgemv_isa isa, const qmatrix& w, const float* a, float* c, int32_t m, bool accumulate,
                int32_t r0, int32_t r1);

/// All rows, split over `pool`'s threads in chunks of rows (any m).
void qgemv(spinning_pool& pool, const qmatrix& w, const float* a, float* c, int32_t m, bool accumulate,
           qgemv_isa isa = qgemv_best_isa());

} // namespace conveyor::model
