// The element-wise and per-row kernels of the CPU forward pass, numerically matched to
// llama.cpp's CPU backend where it is cheap (double-accumulated RMSNorm, iterative RoPE
// angles). Products are in cpu_matmul.hpp; the fp16 KV cache in paged_kv.hpp.
#pragma once

#include <cstdint>

namespace conveyor::model {

/// y = x / sqrt(mean(x^2) + eps) * w over n elements (sum of squares accumulated in double).
void rms_norm(const float* x, const float* w, float* y, int32_t n, float eps);

/// cos/sin of each RoPE pair's angle at `pos` (n_rot/2 entries each): angle_i = pos * theta^(-2i/n_rot)
/// computed as ggml does (iterated products in f32), divided by freq_factors[i] when given, times
/// freq_scale (linear RoPE scaling).
void rope_angles(int32_t pos, int32_t n_rot, float theta, const float* freq_factors, float* cos_out, float* sin_out,
                 float freq_scale = 1.0f);

/// Rotates pairs i < n_rot/2 of each of n_heads vectors of head_dim floats: adjacent pairs
/// (2i, 2i+1) unless `neox`, then halves (i, i + n_rot/2).
void rope_apply(float* v, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_t, const float* sin_t,
                bool neox = false);

/// out[i] = silu(gate[i]) * up[i], with a vector e^x (about 1 ulp; AVX2), the same for every element
/// whatever n and its index.
void silu_mul(const float* gate, const float* up, float* out, int32_t n);

} // namespace conveyor::model
