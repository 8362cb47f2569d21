// The per-ISA row kernels behind qgemv_rows(): one run of rows of a single block type.
// Internal to qgemv*.cpp and its tests; the executor calls qgemv() (qgemv.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/formats/ggml_type.hpp"

namespace conveyor::model {

/// Arguments of a row kernel: n_rows rows of `row_bytes` bytes of type `type` blocks starting at
/// `w`, each k elements; A is (m, k) with rows k apart; output row i of token t is c[t*ldc + i].
struct qgemv_run {
  ggml_type type;
  const uint8_t* w;
  size_t row_bytes;
  int32_t n_rows;
  int32_t k;
  const float* a;
  int32_t m;
  float* c;
  int32_t ldc;
  bool accumulate;
};

/// dequantize_row() of each 32-element block into a buffer, then f32 dot products.
void qgemv_run_scalar(const qgemv_run& r);

#if defined(__x86_64__) || defined(__i386__)
/// Blocks dequantized in AVX registers, FMA dot products; tokens in groups of up to 4.
/// Precondition: the CPU has AVX2, FMA and F16C.
void qgemv_run_avx2(const qgemv_run& r);
#endif

} // namespace conveyor::model
