// A weight matrix as views onto the raw ggml blocks of its GGUF tensors (the file's mapping: no
// copy), for the quantized-weight kernels (qmm.hpp) and the exact f32 kernels (qgemv.hpp). Rows
// may be stacked from several tensors of different block types (Q, K and V; gate and up), one
// part per tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/cpu/qmm.hpp"
#include "model/formats/ggml_type.hpp"

namespace conveyor::model {

/// True for the block types the f32 qgemv kernels read in registers: F16 Q4_0 Q4_1 Q5_0 Q5_1
/// Q8_0 (other qmm_supports()ed types go through dequantize_row() there).
bool qgemv_supports(ggml_type t);

/// Row-major (rows, k) weights as raw blocks: row r is k / block_elems(type) blocks of its part.
/// Holds pointers only: the memory (a GGUF mapping, a test's buffer) must outlive the matrix.
class qmatrix {
public:
  /// A run of rows from one tensor.
  struct part {
    ggml_type type = ggml_type::f32;
    int32_t first_row = 0;          ///< index of the part's first row in the whole matrix
    int32_t rows = 0;
    size_t row_bytes = 0;           ///< bytes of one row's blocks
    const uint8_t* data = nullptr;  ///< rows * row_bytes
    /// The same rows repacked for packed_isa()'s kernels (qmm_pack_rows), or null: owned by
    /// the matrix, shared by its copies.
    const uint8_t* packed = nullptr;
  };

  /// Appends `rows` rows of `k` elements of type `t` at `src`. Returns false, leaving the matrix
  /// unchanged, when `t` is not qmm_supports()ed, k is not a positive multiple of 32 and of the
  /// type's block, or k differs from the rows already appended.
  bool append(ggml_type t, const uint8_t* src, int32_t rows, int32_t k);
  /// Drops every part.
  void clear();
  /// Repacks every part that `isa`'s qmm kernels have a packed layout for (qmm_packs) into
  /// memory the matrix owns; cpu_matmul reads those rows packed when it runs `isa`. Returns the
  /// raw parts repacked (their bytes are no longer read by the fast kernels). Done once, at load.
  std::vector<part> pack(cpu_isa isa);
  /// The ISA of pack(), or scalar when nothing is packed.
  cpu_isa packed_isa() const { return packed_isa_; }

  bool empty() const { return parts_.empty(); }
  int32_t rows() const { return rows_; }
  int32_t k() const { return k_; }
  const std::vector<part>& parts() const { return parts_; }
  /// Bytes of the blocks viewed.
  size_t bytes() const;
  /// Bytes of the rows pack() repacked (held by the matrix).
  size_t packed_bytes() const;

private:
  std::vector<part> parts_;
  std::shared_ptr<uint8_t[]> packed_;
  cpu_isa packed_isa_ = cpu_isa::scalar;
  int32_t rows_ = 0;
  int32_t k_ = 0;
};

} // namespace conveyor::model
