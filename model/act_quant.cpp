#include "model/act_quant.hpp"

#include <algorithm>
#include <cmath>

#include "model/dequant.hpp"

namespace conveyor::model {
namespace {

// Q8_0 / Q8_1 (x86 path): d = amax/127 stored as fp16, q = round-half-even(x * 127/amax).
void round_q8_block32(float* x) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[i]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const float d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
  for (int i = 0; i < 32; ++i) x[i] = std::nearbyint(x[i] * id) * d;
}

// Q8_K: scale from the signed value of largest magnitude, d kept in f32.
void round_q8_k_block256(float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < 256; ++i)
    if (std::abs(x[i]) > amax) amax = std::abs(x[i]), max = x[i];
  if (amax == 0.0f) return;
  const float iscale = -127.0f / max;
  for (int i = 0; i < 256; ++i) x[i] = std::min(127.0f, std::nearbyint(iscale * x[i])) / iscale;
}

} // namespace

act_format act_format_for(ggml_type t) {
  switch (t) {
    case ggml_type::q4_1: case ggml_type::q5_1: return act_format::q8_1;
    case ggml_type::q4_0: case ggml_type::q5_0: case ggml_type::q8_0: return act_format::q8_0;
    case ggml_type::q2_k: case ggml_type::q3_k: case ggml_type::q4_k: case ggml_type::q5_k: case ggml_type::q6_k:
      return act_format::q8_k;
    case ggml_type::f16: return act_format::f16;
    case ggml_type::bf16: return act_format::bf16;
    default: return act_format::none;
  }
}

void round_activations(act_format f, float* x, int64_t n_rows, int64_t n_cols) {
  const int64_t n = n_rows * n_cols;
  switch (f) {
    case act_format::none: return;
    case act_format::q8_0:
    case act_format::q8_1:
      for (int64_t i = 0; i + 32 <= n; i += 32) round_q8_block32(x + i);
      return;
    case act_format::q8_k:
      for (int64_t i = 0; i + 256 <= n; i += 256) round_q8_k_block256(x + i);
      return;
    case act_format::f16:
      for (int64_t i = 0; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
      return;
    case act_format::bf16:
      for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
      return;
  }
}

} // namespace conveyor::model
