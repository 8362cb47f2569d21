// qmatrix: raw ggml blocks of a weight matrix, copied out of the GGUF mapping at load.
#include "model/qgemv_matrix.hpp"

#include <cstring>

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
  if (!qgemv_supports(t) || rows <= 0 || k <= 0 || k % 32 != 0) return false;
  if (!parts_.empty() && k != k_) return false;
  part p;
  p.type = t;
  p.first_row = rows_;
  p.rows = rows;
  p.row_bytes = static_cast<size_t>(k) / block_elems(t) * block_bytes(t);
  p.data.resize(p.row_bytes * static_cast<size_t>(rows));
  std::memcpy(p.data.data(), src, p.data.size());
  parts_.push_back(std::move(p));
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
  for (const part& p : parts_) n += p.data.size();
  return n;
}

} // namespace conveyor::model
