// qmatrix: views onto the raw ggml blocks of a weight matrix's tensors.
#include "model/cpu/qgemv_matrix.hpp"

#include "model/cpu/qmm.hpp"

namespace conveyor::model {

bool qgemv_supports(ggml_type t) {
  switch (t) {
    case ggml_type::f16:
    case ggml_type::q4_0:
    case ggml_type::q4_1:
    case ggml_type::q5_0:
    case ggml_type::q5_1:
    case ggml_type::q8_0:
      return true;
    default:
      return false;
  }
}

bool qmatrix::append(ggml_type t, const uint8_t* src, int32_t rows, int32_t k) {
  if (!qmm_supports(t) || rows <= 0 || k <= 0 || k % 32 != 0 || k % static_cast<int32_t>(block_elems(t)) != 0) return false;
  if (!parts_.empty() && k != k_) return false;
  part p;
  p.type = t;
  p.first_row = rows_;
  p.rows = rows;
  p.row_bytes = static_cast<size_t>(k) / block_elems(t) * block_bytes(t);
  p.data = src;
  parts_.push_back(p);
  rows_ += rows;
  k_ = k;
  return true;
}

void qmatrix::clear() {
  parts_.clear();
  rows_ = 0;
  k_ = 0;
}

size_t qmatrix::bytes() const {
  size_t n = 0;
  for (const part& p : parts_) n += p.row_bytes * static_cast<size_t>(p.rows);
  return n;
}

} // namespace conveyor::model
