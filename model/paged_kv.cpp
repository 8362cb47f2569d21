#include "model/paged_kv.hpp"

#include <cmath>

#include "model/dequant.hpp"

namespace conveyor::model {

paged_kv::paged_kv(int32_t n_layer, int32_t num_blocks, int32_t block_size, int32_t n_head_kv, int32_t head_dim)
    : num_blocks_(num_blocks), block_size_(block_size), n_head_kv_(n_head_kv), head_dim_(head_dim),
      row_(int64_t{n_head_kv} * head_dim) {
  const size_t n = static_cast<size_t>(n_layer) * num_blocks * block_size * row_;
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
}

int64_t paged_kv::block_bytes(int32_t n_layer, int32_t block_size, int32_t n_head_kv, int32_t head_dim) {
  return 2 * int64_t{n_layer} * block_size * n_head_kv * head_dim * static_cast<int64_t>(sizeof(float));
}

void paged_kv::attend(int32_t layer, const block_id* table, int32_t pos, int32_t kv_head, const float* q, float scale,
                      float* out, float* scores, bool fp16_inputs) const {
  const int32_t hd = head_dim_;
  float qr[512];
  if (fp16_inputs && hd <= 512) {
    for (int32_t d = 0; d < hd; ++d) qr[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
    q = qr;
  }
  float mx = -INFINITY;
  for (int32_t j = 0; j <= pos; ++j) {
    const float* kj = k(layer, table[j / block_size_], j % block_size_) + int64_t{kv_head} * hd;
    float s = 0.0f;
    for (int32_t d = 0; d < hd; ++d) s += q[d] * kj[d];
    s *= scale;
    scores[j] = s;
    mx = s > mx ? s : mx;
  }
  double sum = 0.0;
  for (int32_t j = 0; j <= pos; ++j) {
    scores[j] = std::exp(scores[j] - mx);
    sum += scores[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int32_t d = 0; d < hd; ++d) out[d] = 0.0f;
  for (int32_t j = 0; j <= pos; ++j) {
    const float* vj = v(layer, table[j / block_size_], j % block_size_) + int64_t{kv_head} * hd;
    const float p = fp16_inputs ? fp16_to_fp32(fp32_to_fp16(scores[j] * inv)) : scores[j] * inv;
    for (int32_t d = 0; d < hd; ++d) out[d] += p * vj[d];
  }
}

} // namespace conveyor::model
