// Exact IEEE half / bfloat16 conversions and block dequantization to f32 (model-format.md §2).
// Results are bit-identical to gguf-py's numpy dequantizers (tests/unit/model/dequant_test.cpp).
// NOTE: that holds even when the compiler contracts `d*q + m` into an FMA: every product here is
// an fp16 scale times a small integer (<= 11 + 8 significant bits), so it is exact in f32.
#include "model/formats/dequant.hpp"

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace conveyor::model {
namespace {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float load_half(const uint8_t* p) { return fp16_to_fp32(load_u16(p)); }

// Q4_K / Q5_K 6-bit scale and min of sub-block j (ggml get_scale_min_k4).
inline void scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    mn = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void dequant_f16(const uint8_t* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2 * i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) {
    y[i] = load_half(x + 2 * i);
  }
}

void dequant_bf16(const uint8_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = bf16_to_fp32(load_u16(x + 2 * i));
  }
}

// block_q4_0 { half d; u8 qs[16]; } -- low nibbles: elements 0..15, high nibbles: 16..31.
void dequant_q4_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 18, y += 32) {
    const float d = load_half(x);
    const uint8_t* qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
      y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

// block_q4_1 { half d; half m; u8 qs[16]; }
void dequant_q4_1(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 20, y += 32) {
    const float d = load_half(x);
    const float m = load_half(x + 2);
    const uint8_t* qs = x + 4;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
      y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// block_q5_0 { half d; u8 qh[4]; u8 qs[16]; } -- bit j of qh is bit 4 of element j.
void dequant_q5_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 22, y += 32) {
    const float d = load_half(x);
    uint32_t qh;
    std::memcpy(&qh, x + 2, sizeof qh);
    const uint8_t* qs = x + 6;
    for (int j = 0; j < 16; ++j) {
      const int q0 = static_cast<int>((qs[j] & 0xF) | (((qh >> j) & 1) << 4));
      const int q1 = static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      y[j] = static_cast<float>(q0 - 16) * d;
      y[j + 16] = static_cast<float>(q1 - 16) * d;
    }
  }
}

// block_q5_1 { half d; half m; u8 qh[4]; u8 qs[16]; }
void dequant_q5_1(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 24, y += 32) {
    const float d = load_half(x);
    const float m = load_half(x + 2);
    uint32_t qh;
    std::memcpy(&qh, x + 4, sizeof qh);
    const uint8_t* qs = x + 8;
    for (int j = 0; j < 16; ++j) {
      const uint32_t q0 = (qs[j] & 0xFu) | (((qh >> j) & 1u) << 4);
      const uint32_t q1 = (qs[j] >> 4u) | (((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(q0) * d + m;
      y[j + 16] = static_cast<float>(q1) * d + m;
    }
  }
}

// block_q8_0 { half d; i8 qs[32]; }
void dequant_q8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 34, y += 32) {
    const float d = load_half(x);
    const auto* qs = reinterpret_cast<const int8_t*>(x + 2);
    for (int j = 0; j < 32; ++j) {
      y[j] = static_cast<float>(qs[j]) * d;
    }
  }
}

// block_q4_k { half d; half dmin; u8 scales[12]; u8 qs[128]; } -- 4 groups of 64: low nibbles
// of qs[32g..32g+31] are elements 64g..64g+31, high nibbles the next 32.
// block_q5_k adds u8 qh[32] before qs: bit s of qh[l] is bit 4 of element 32s+l.
template <bool five_bit> void dequant_qk(const uint8_t* x, float* y, int64_t nb) {
  constexpr int block = five_bit ? 176 : 144;
  for (int64_t b = 0; b < nb; ++b, x += block) {
    const float d = load_half(x);
    const float dmin = load_half(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* qh = x + 16;
    const uint8_t* qs = x + (five_bit ? 48 : 16);
    for (int g = 0; g < 4; ++g, qs += 32, y += 64) {
      uint8_t sc0, m0, sc1, m1;
      scale_min_k4(2 * g, scales, sc0, m0);
      scale_min_k4(2 * g + 1, scales, sc1, m1);
      const float d0 = d * static_cast<float>(sc0), dm0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), dm1 = dmin * static_cast<float>(m1);
      for (int l = 0; l < 32; ++l) {
        uint32_t q0 = qs[l] & 0xFu, q1 = qs[l] >> 4u;
        if constexpr (five_bit) {
          q0 |= ((qh[l] >> (2 * g)) & 1u) << 4;
          q1 |= ((qh[l] >> (2 * g + 1)) & 1u) << 4;
        }
        y[l] = d0 * static_cast<float>(q0) - dm0;
        y[l + 32] = d1 * static_cast<float>(q1) - dm1;
      }
    }
  }
}

// block_q6_k { u8 ql[128]; u8 qh[64]; i8 scales[16]; half d; } -- d is LAST; one scale per 16.
void dequant_q6_k(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 210) {
    const float d = load_half(x + 208);
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(x + 192);
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

} // namespace

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    // inf, or NaN with its payload kept and the quiet bit set (what F16C's vcvtph2ps does).
    bits = sign | 0x7F800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: mant * 2^-24. Normalise so the leading one becomes the implicit bit.
    const int p = std::bit_width(mant) - 1;  // 0..9
    bits = sign | (static_cast<uint32_t>(p + 103) << 23) | ((mant << (23 - p)) & 0x7FFFFFu);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {  // NaN: keep the top payload bits, force quiet
    return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  }
  if (a >= 0x477FF000u) {  // >= 65520 rounds to inf (65520 is a tie; even is inf)
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (a >= 0x38800000u) {  // normal half (>= 2^-14)
    uint32_t h = (((a >> 23) - 112) << 10) | ((a >> 13) & 0x3FFu);
    const uint32_t rem = a & 0x1FFFu;
    h += (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ? 1u : 0u;  // carry may bump the exponent
    return static_cast<uint16_t>(sign | h);
  }
  if (a <= 0x33000000u) {  // <= 2^-25 (a tie with 0, which is even) -> signed zero
    return sign;
  }
  // Subnormal half: value / 2^-24, rounded to nearest even.
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126 - (a >> 23);  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  h += (rem > halfway || (rem == halfway && (h & 1u))) ? 1u : 0u;
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((x >> 16) | 64u);  // quiet NaN
  }
  return static_cast<uint16_t>((static_cast<uint64_t>(x) + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

void dequantize_row(ggml_type t, const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint8_t*>(src);
  const int64_t nb = n / static_cast<int64_t>(block_elems(t) == 0 ? 1 : block_elems(t));
  switch (t) {
  case ggml_type::f32: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); return;
  case ggml_type::f16: dequant_f16(x, dst, n); return;
  case ggml_type::bf16: dequant_bf16(x, dst, n); return;
  case ggml_type::q4_0: dequant_q4_0(x, dst, nb); return;
  case ggml_type::q4_1: dequant_q4_1(x, dst, nb); return;
  case ggml_type::q5_0: dequant_q5_0(x, dst, nb); return;
  case ggml_type::q5_1: dequant_q5_1(x, dst, nb); return;
  case ggml_type::q8_0: dequant_q8_0(x, dst, nb); return;
  case ggml_type::q4_k: dequant_qk<false>(x, dst, nb); return;
  case ggml_type::q5_k: dequant_qk<true>(x, dst, nb); return;
  case ggml_type::q6_k: dequant_q6_k(x, dst, nb); return;
  default: break;
  }
  // Broken precondition (the caller must check is_dequantizable): a bug, not bad input.
  std::fprintf(stderr, "dequantize_row: type %s is not dequantizable\n", type_name(t).c_str());
  std::abort();
}

} // namespace conveyor::model
