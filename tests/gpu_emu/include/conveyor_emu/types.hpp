// CUDA's language surface for host C++ (the CPU emulator, docs/gpu-emulator.md): function qualifiers,
// dim3 and the vector types, bf16 with round-to-nearest-even conversions. Layouts and alignments
// match the real headers, so host code that sizes or copies these types sees the same bytes.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __CUDACC_EMU__ 1

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

/// bf16 as its 16 bits; conversions below (cuda_bf16.h's names).
struct __nv_bfloat16 {
  uint16_t __x;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
using nv_bfloat16 = __nv_bfloat16;
using nv_bfloat162 = __nv_bfloat162;

inline float __bfloat162float(__nv_bfloat16 h) { return std::bit_cast<float>(static_cast<uint32_t>(h.__x) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const uint32_t b = std::bit_cast<uint32_t>(f);
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu) != 0) return {static_cast<uint16_t>(0x7FFF)};
  const uint32_t rounded = b + 0x7FFFu + ((b >> 16) & 1u);  // round to nearest, ties to even
  return {static_cast<uint16_t>(rounded >> 16)};
}
inline __nv_bfloat16 __float2bfloat16_rz(float f) {  // toward zero: the low half dropped
  const uint32_t b = std::bit_cast<uint32_t>(f);
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu) != 0) return {static_cast<uint16_t>(0x7FFF)};
  return {static_cast<uint16_t>(b >> 16)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float2 __bfloat1622float2(__nv_bfloat162 v) { return {__bfloat162float(v.x), __bfloat162float(v.y)}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)}; }
inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __floats2bfloat162_rn(v.x, v.y); }

inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
