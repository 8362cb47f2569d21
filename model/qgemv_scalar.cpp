// Portable qgemv row kernel: each 32-element block through dequantize_row() (so the weights
// are exactly the f32 matrix's), then f32 dot products, one partial sum per block and token.
#include <vector>

#include "model/dequant.hpp"
#include "model/qgemv_kernels.hpp"

namespace conveyor::model {

void qgemv_run_scalar(const qgemv_run& r) {
  constexpr int32_t chunk = 32;  // elements per dequantize_row() call: one block (32 for F16)
  const size_t chunk_bytes = chunk / block_elems(r.type) * block_bytes(r.type);
  std::vector<float> sums(static_cast<size_t>(r.m));
  float wv[chunk];
  for (int32_t i = 0; i < r.n_rows; ++i) {
    const uint8_t* row = r.w + static_cast<size_t>(i) * r.row_bytes;
    for (float& s : sums) s = 0.0f;
    for (int32_t j0 = 0; j0 < r.k; j0 += chunk, row += chunk_bytes) {
      dequantize_row(r.type, row, wv, chunk);
      for (int32_t t = 0; t < r.m; ++t) {
        const float* x = r.a + static_cast<size_t>(t) * r.k + j0;
        float s = 0.0f;
        for (int32_t j = 0; j < chunk; ++j) s += x[j] * wv[j];
        sums[static_cast<size_t>(t)] += s;
      }
    }
    for (int32_t t = 0; t < r.m; ++t) {
      float& out = r.c[static_cast<size_t>(t) * r.ldc + i];
      out = r.accumulate ? out + sums[static_cast<size_t>(t)] : sums[static_cast<size_t>(t)];
    }
  }
}

} // namespace conveyor::model
