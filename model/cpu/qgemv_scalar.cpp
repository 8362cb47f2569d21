// Portable qgemv row kernel: each block (32 elements, 256 for K-quants) through dequantize_row()
// (so the weights are exactly the f32 matrix's), then f32 dot products, one partial sum per block
// and token. Also the exact path of the types the AVX2 kernel does not read (F32 BF16 Q4_K Q5_K Q6_K).
#include <algorithm>
#include <vector>

#include "model/cpu/qgemv_kernels.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::model {

void qgemv_run_scalar(const qgemv_run& r) {
  // Elements per dequantize_row() call: one block (32 for the plain types).
  const int32_t chunk = std::max<int32_t>(32, static_cast<int32_t>(block_elems(r.type)));
  const size_t chunk_bytes = static_cast<size_t>(chunk) / block_elems(r.type) * block_bytes(r.type);
  std::vector<float> sums(static_cast<size_t>(r.m));
  float wv[256];
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
