#include "model/cpu/cpu_ops.hpp"

#include <cmath>


namespace conveyor::model {

void rms_norm(const float* x, const float* w, float* y, int32_t n, float eps) {
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int32_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void rope_angles(int32_t pos, int32_t n_rot, float theta, const float* freq_factors, float* cos_out, float* sin_out,
                 float freq_scale) {
  const float theta_scale = std::pow(theta, -2.0f / static_cast<float>(n_rot));
  float angle = static_cast<float>(pos);
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    const float a = freq_scale * (freq_factors ? angle / freq_factors[i] : angle);  // ggml's rope_yarn, no YaRN
    cos_out[i] = std::cos(a);
    sin_out[i] = std::sin(a);
    angle *= theta_scale;
  }
}

void rope_apply(float* v, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_t, const float* sin_t,
                bool neox) {
  const int32_t half = n_rot / 2, stride = neox ? 1 : 2, offset = neox ? half : 1;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* x = v + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      float& a = x[stride * i];
      float& b = x[stride * i + offset];
      const float x0 = a, x1 = b;
      a = x0 * cos_t[i] - x1 * sin_t[i];
      b = x0 * sin_t[i] + x1 * cos_t[i];
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int32_t n) {
  for (int32_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

} // namespace conveyor::model
