// qmatrix: views onto the raw ggml blocks of a weight matrix's tensors.
#include "model/cpu/qgemv_matrix.hpp"

#include <cstdlib>
#include <new>

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

std::vector<qmatrix::part> qmatrix::pack(cpu_isa isa) {
  std::vector<part> raw;
  size_t total = 0;
  for (const part& p : parts_)
    if (p.packed == nullptr && qmm_packs(isa, p.type)) total += (p.row_bytes * static_cast<size_t>(p.rows) + 63) & ~size_t{63};
  if (total == 0) return raw;
  void* mem = std::aligned_alloc(64, total);
  if (mem == nullptr) throw std::bad_alloc();
  packed_ = std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(mem), [](uint8_t* q) { std::free(q); });
  packed_isa_ = isa;
  uint8_t* at = packed_.get();
  for (part& p : parts_) {
    if (p.packed != nullptr || !qmm_packs(isa, p.type)) continue;
    qmm_pack_rows(isa, p.type, p.data, p.rows, k_, at);
    p.packed = at;
    raw.push_back(p);
    at += (p.row_bytes * static_cast<size_t>(p.rows) + 63) & ~size_t{63};
  }
  return raw;
}

void qmatrix::clear() {
  packed_.reset();
  packed_isa_ = cpu_isa::scalar;
  parts_.clear();
  rows_ = 0;
  k_ = 0;
}

size_t qmatrix::bytes() const {
  size_t n = 0;
  for (const part& p : parts_) n += p.row_bytes * static_cast<size_t>(p.rows);
  return n;
}

size_t qmatrix::packed_bytes() const {
  size_t n = 0;
  for (const part& p : parts_)
    if (p.packed != nullptr) n += p.row_bytes * static_cast<size_t>(p.rows);
  return n;
}

} // namespace conveyor::model
