// Test support: straightforward reference quantizers (f32 -> ggml blocks) for the types
// dequantize_row() reads. Legacy types follow ggml's *_ref rules exactly; K-quants use a plain
// min/max scale choice instead of ggml's search (same format, somewhat larger error).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "model/formats/dequant.hpp"
#include "tiny_model.hpp"

namespace conveyor::model {
namespace {

void put_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

int nearest(float v) { return static_cast<int>(std::lround(v)); }

// Q4_0 / Q5_0: d = signed max / -(2^(bits-1)), q = trunc(x/d + offset + 0.5) clamped.
void quant_sym(const float* x, uint8_t* y, int bits) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float half_range = bits == 4 ? 8.0f : 16.0f;
  const float d = max / -half_range;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(y, d);
  uint8_t q[32];
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<uint8_t>(std::min<int>(2 * static_cast<int>(half_range) - 1,
                                              static_cast<int8_t>(x[j] * id + half_range + 0.5f)));
  }
  uint8_t* qs = y + (bits == 4 ? 2 : 6);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  if (bits == 5) {
    std::memcpy(y + 2, &qh, 4);
  }
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min.
void quant_affine(const float* x, uint8_t* y, int bits) {
  const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
  const int levels = (1 << bits) - 1;
  const float d = (mx - mn) / static_cast<float>(levels);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(y, d);
  put_half(y + 2, mn);
  uint8_t q[32];
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<uint8_t>(std::min<int>(levels, static_cast<int8_t>((x[j] - mn) * id + 0.5f)));
  }
  uint8_t* qs = y + (bits == 4 ? 4 : 8);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  if (bits == 5) {
    std::memcpy(y + 4, &qh, 4);
  }
}

void quant_q8_0(const float* x, uint8_t* y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    amax = std::max(amax, std::fabs(x[j]));
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(y, d);
  for (int j = 0; j < 32; ++j) {
    y[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale and min, super-block d / dmin in fp16.
void quant_qk(const float* x, uint8_t* y, bool five_bit) {
  const int levels = five_bit ? 31 : 15;
  float scale[8], minv[8], max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 8; ++s) {
    const float mn = std::min(0.0f, *std::min_element(x + 32 * s, x + 32 * s + 32));
    const float mx = *std::max_element(x + 32 * s, x + 32 * s + 32);
    scale[s] = (mx - mn) / static_cast<float>(levels);
    minv[s] = -mn;
    max_scale = std::max(max_scale, scale[s]);
    max_min = std::max(max_min, minv[s]);
  }
  const float d = fp16_to_fp32(fp32_to_fp16(max_scale / 63.0f));
  const float dmin = fp16_to_fp32(fp32_to_fp16(max_min / 63.0f));
  put_half(y, d);
  put_half(y + 2, dmin);
  uint8_t* sc = y + 4;
  std::memset(sc, 0, 12);
  uint8_t L[256];
  for (int s = 0; s < 8; ++s) {
    const int ls = d > 0.0f ? std::clamp(nearest(scale[s] / d), 0, 63) : 0;
    const int lm = dmin > 0.0f ? std::clamp(nearest(minv[s] / dmin), 0, 63) : 0;
    if (s < 4) {
      sc[s] = static_cast<uint8_t>(ls);
      sc[s + 4] = static_cast<uint8_t>(lm);
    } else {
      sc[s + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      sc[s - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[s] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
    const float ds = d * static_cast<float>(ls), dm = dmin * static_cast<float>(lm);
    for (int l = 0; l < 32; ++l) {
      const float v = x[32 * s + l];
      L[32 * s + l] = static_cast<uint8_t>(ds > 0.0f ? std::clamp(nearest((v + dm) / ds), 0, levels) : 0);
    }
  }
  uint8_t* qh = y + 16;
  uint8_t* qs = y + (five_bit ? 48 : 16);
  if (five_bit) {
    std::memset(qh, 0, 32);
  }
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo = L[64 * g + l], hi = L[64 * g + 32 + l];
      qs[32 * g + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      if (five_bit) {
        qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      }
    }
  }
}

// Q6_K: 16 sub-blocks of 16 with int8 scales, q in [-32, 31], d last.
void quant_q6_k(const float* x, uint8_t* y) {
  float scale[16], max_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) {
      amax = std::max(amax, std::fabs(x[16 * s + l]));
    }
    scale[s] = amax / 31.0f;
    max_scale = std::max(max_scale, scale[s]);
  }
  const float d = fp16_to_fp32(fp32_to_fp16(max_scale / 127.0f));
  put_half(y + 208, d);
  uint8_t L[256];
  for (int s = 0; s < 16; ++s) {
    const int ls = d > 0.0f ? std::clamp(nearest(scale[s] / d), 0, 127) : 0;
    y[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(ls));
    const float ds = d * static_cast<float>(ls);
    for (int l = 0; l < 16; ++l) {
      const int q = ds > 0.0f ? std::clamp(nearest(x[16 * s + l] / ds), -32, 31) : 0;
      L[16 * s + l] = static_cast<uint8_t>(q + 32);
    }
  }
  uint8_t* ql = y;
  uint8_t* qh = y + 128;
  for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* q = L + j + l;
      ql[l] = static_cast<uint8_t>((q[0] & 0xF) | ((q[64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q[32] & 0xF) | ((q[96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
    }
  }
}

} // namespace

std::vector<uint8_t> quantize_row_ref(ggml_type t, std::span<const float> x) {
  if (!is_dequantizable(t)) {
    throw std::invalid_argument("quantize_row_ref: unsupported type " + type_name(t));
  }
  const size_t blck = block_elems(t), bytes = block_bytes(t);
  if (x.size() % blck != 0) {
    throw std::invalid_argument("quantize_row_ref: " + std::to_string(x.size()) + " values is not a multiple of " +
                                std::to_string(blck));
  }
  std::vector<uint8_t> out(x.size() / blck * bytes);
  for (size_t b = 0; b < x.size() / blck; ++b) {
    const float* xb = x.data() + b * blck;
    uint8_t* yb = out.data() + b * bytes;
    switch (t) {
    case ggml_type::f32: std::memcpy(yb, xb, 4); break;
    case ggml_type::f16: { const uint16_t h = fp32_to_fp16(*xb); std::memcpy(yb, &h, 2); break; }
    case ggml_type::bf16: { const uint16_t h = fp32_to_bf16(*xb); std::memcpy(yb, &h, 2); break; }
    case ggml_type::q4_0: quant_sym(xb, yb, 4); break;
    case ggml_type::q5_0: quant_sym(xb, yb, 5); break;
    case ggml_type::q4_1: quant_affine(xb, yb, 4); break;
    case ggml_type::q5_1: quant_affine(xb, yb, 5); break;
    case ggml_type::q8_0: quant_q8_0(xb, yb); break;
    case ggml_type::q4_k: quant_qk(xb, yb, false); break;
    case ggml_type::q5_k: quant_qk(xb, yb, true); break;
    case ggml_type::q6_k: quant_q6_k(xb, yb); break;
    default: throw std::invalid_argument("quantize_row_ref: unsupported type " + type_name(t));
    }
  }
  return out;
}

} // namespace conveyor::model
