#include "model/cpu/cpu_ops.hpp"

#include <immintrin.h>

#include <cmath>

#include "model/cpu/simd_exp.hpp"

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

namespace {

// silu(g) * u for 8 elements: e = e^-|g| (exp8's domain, no overflow), silu = g / (1 + e) for
// g >= 0 and g * e / (1 + e) for g < 0 (the same value, as e^-g = 1 / e there).
inline __m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 neg = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 e = exp8(_mm256_or_ps(g, _mm256_set1_ps(-0.0f)));  // -|g|
  const __m256 num = _mm256_mul_ps(g, _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, neg));
  return _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

} // namespace

// Every element takes silu_mul8, the last few through a padded copy, so an element's result does
// not depend on where it sits in the row (or on n).
void silu_mul(const float* gate, const float* up, float* out, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i == n) return;
  alignas(32) float g[8] = {}, u[8] = {}, o[8];
  for (int32_t j = 0; j < n - i; ++j) {
    g[j] = gate[i + j];
    u[j] = up[i + j];
  }
  _mm256_store_ps(o, silu_mul8(_mm256_load_ps(g), _mm256_load_ps(u)));
  for (int32_t j = 0; j < n - i; ++j) out[i + j] = o[j];
}

} // namespace conveyor::model
