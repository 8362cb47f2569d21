// The CPU executor's linear layers: C(m, n) = A(m, k) · W(n, k)^T (+ C) over a qmatrix (weights in
// their GGUF block types), split over the thread pool by weight rows (and token groups for long
// steps). Two numerics:
//   fast  (default): activations quantized per block to 8 bits, integer dot products (qmm.hpp)
//   exact: f32 activations times the exact f32 weight values (qgemv.hpp): today's f32 semantics,
//          the mode of the parity tests against llama.cpp's f32 runs
// Both keep batch invariance: an output element depends only on its weight row and its token's
// activations, not on m, the split, or the other tokens of the step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/cpu/qgemv_matrix.hpp"
#include "model/cpu/qmm.hpp"

namespace conveyor::model {

class spinning_pool;

enum class cpu_math { fast, exact };
/// "fast" / "exact"; parse_cpu_math() throws std::invalid_argument for anything else.
const char* to_string(cpu_math m);
cpu_math parse_cpu_math(const std::string& s);

class cpu_matmul {
public:
  /// isa: the qmm kernels' instruction set (fast mode), cpu_best_isa() by default.
  explicit cpu_matmul(cpu_math math = cpu_math::fast, cpu_isa isa = cpu_best_isa());

  cpu_math math() const { return math_; }
  cpu_isa isa() const { return isa_; }
  /// C(m, w.rows()) = A(m, w.k()) · W^T, plus C's old values when `accumulate`; rows of A and C
  /// contiguous (lda = w.k(), ldc = w.rows()).
  void run(spinning_pool& pool, const qmatrix& w, const float* a, int32_t m, float* c, bool accumulate);

private:
  cpu_math math_;
  cpu_isa isa_;
  std::vector<uint8_t> act_[4];  // quantized activations, one buffer per act_format
  struct row_chunk { int32_t part, lo, hi; };  // rows [lo, hi) of a part
  std::vector<row_chunk> chunks_;
};

} // namespace conveyor::model
