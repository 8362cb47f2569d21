// Portable legacy qmm kernel (qmm_kernels.hpp): the reference the SIMD kernels are tested
// against. One (weight row, token) pair at a time through the same function, so batch
// invariance holds trivially. Quantized types: the float order of qmm_rl.hpp, block by block
// acc = fma(isum, d_w * d_a, acc) (then acc = fma(m_w, s_a, acc) for Q4_1 / Q5_1), which the
// SIMD kernels keep lane by lane: they give these bits. F32 / F16 / BF16: f32 activations, eight
// interleaved partial sums (element i to lane i % 8) like the SIMD kernels.
#include <cmath>
#include <cstring>

#include "model/cpu/qmm_kernels.hpp"
#include "model/formats/dequant.hpp"

namespace conveyor::model {
namespace {

inline uint16_t ld_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float ld_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float ld_half(const uint8_t* p) { return fp16_to_fp32(ld_u16(p)); }

/// The 32 integer weights of the block at p (signed types centred: Q4_0 q-8, Q5_0 q-16), its
/// scale and its min (0 for types without one).
void unpack(ggml_type t, const uint8_t* p, int32_t q[32], float& d, float& m) {
  d = ld_half(p);
  m = 0.0f;
  uint32_t qh = 0;
  const uint8_t* qs = p + 2;
  int32_t off = 0;
  switch (t) {
    case ggml_type::q4_0: off = 8; break;
    case ggml_type::q4_1: m = ld_half(p + 2); qs = p + 4; break;
    case ggml_type::q5_0: std::memcpy(&qh, p + 2, 4); qs = p + 6; off = 16; break;
    case ggml_type::q5_1: m = ld_half(p + 2); std::memcpy(&qh, p + 4, 4); qs = p + 8; break;
    default:  // q8_0
      for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(qs[i]);
      return;
  }
  for (int i = 0; i < 16; ++i) {
    q[i] = static_cast<int32_t>((qs[i] & 0xFu) | (((qh >> i) & 1u) << 4)) - off;
    q[i + 16] = static_cast<int32_t>((qs[i] >> 4u) | (((qh >> (i + 16)) & 1u) << 4)) - off;
  }
}

float dot_quant(ggml_type t, const uint8_t* w, const uint8_t* a, int32_t nb) {
  const size_t bb = block_bytes(t);
  const auto* qa = reinterpret_cast<const int8_t*>(a);
  const uint8_t* da = a + 32 * static_cast<size_t>(nb);
  const uint8_t* sa = da + 4 * static_cast<size_t>(nb);
  const bool has_min = t == ggml_type::q4_1 || t == ggml_type::q5_1;
  float acc = 0.0f;
  for (int32_t b = 0; b < nb; ++b, w += bb, qa += 32) {
    int32_t q[32];
    float d, m;
    unpack(t, w, q, d, m);
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += q[i] * qa[i];
    const float scale = d * ld_f32(da + 4 * b);  // rounded apart, as the SIMD kernels' mul
    acc = std::fma(static_cast<float>(isum), scale, acc);
    if (has_min) acc = std::fma(m, ld_f32(sa + 4 * b), acc);
  }
  return acc;
}

inline float weight_at(ggml_type t, const uint8_t* w, int32_t i) {
  switch (t) {
    case ggml_type::f16: return ld_half(w + 2 * static_cast<size_t>(i));
    case ggml_type::bf16: return bf16_to_fp32(ld_u16(w + 2 * static_cast<size_t>(i)));
    default: return ld_f32(w + 4 * static_cast<size_t>(i));
  }
}

float dot_float(ggml_type t, const uint8_t* w, const uint8_t* a, int32_t k) {
  float lane[8] = {};
  const int32_t k8 = k & ~7;
  for (int32_t i = 0; i < k8; ++i) lane[i & 7] += weight_at(t, w, i) * ld_f32(a + 4 * static_cast<size_t>(i));
  // The SIMD kernels' horizontal order: halves, then pairs, then the last two.
  const float s0 = lane[0] + lane[4], s1 = lane[1] + lane[5], s2 = lane[2] + lane[6], s3 = lane[3] + lane[7];
  float s = (s0 + s2) + (s1 + s3);
  for (int32_t i = k8; i < k; ++i) s += weight_at(t, w, i) * ld_f32(a + 4 * static_cast<size_t>(i));
  return s;
}

} // namespace

void qmm_legacy_scalar(const qmm_job& j) {
  const bool quant = act_format_for(j.type) != act_format::f32;
  for (int32_t t = 0; t < j.m; ++t) {
    const uint8_t* a = j.act + static_cast<size_t>(t) * j.act_stride;
    float* c = j.c + static_cast<size_t>(t) * static_cast<size_t>(j.ldc);
    for (int32_t r = 0; r < j.n_rows; ++r) {
      const uint8_t* w = j.w + static_cast<size_t>(r) * j.w_row_bytes;
      const float v = quant ? dot_quant(j.type, w, a, j.k / 32) : dot_float(j.type, w, a, j.k);
      c[r] = j.accumulate ? c[r] + v : v;
    }
  }
}

} // namespace conveyor::model
