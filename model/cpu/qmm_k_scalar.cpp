// Portable K-quant qmm (Q4_K, Q5_K, Q6_K weights x Q8_K activations): the reference the SIMD
// kernels match bit for bit. Per (row, token, block): exact int32 sums, then kq::kq_step().
//   Q4_K/Q5_K: isum = sum_j sc_j * sum_{32 of sub-block j} q*a (q unsigned, 0..15 / 0..31)
//              msum = sum_j min_j * (bsums[2j] + bsums[2j+1])
//   Q6_K:      isum = sum_p sc_p * sum_{16 of sub-block p} (q-32)*a
#include "model/cpu/qmm_k_common.hpp"
#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {
namespace {

/// Unsigned 4/5-bit value of element e (0..255) of a Q4_K / Q5_K block.
template <bool five> inline int q45_at(const uint8_t* blk, int e) {
  const uint8_t* qs = blk + (five ? 48 : 16);
  const int g = e / 64, l = e % 32;
  int q = (e % 64) < 32 ? (qs[32 * g + l] & 0xF) : (qs[32 * g + l] >> 4);
  if constexpr (five) q |= ((blk[16 + l] >> (e / 32)) & 1) << 4;
  return q;
}

/// Signed 6-bit value (q - 32) of element e of a Q6_K block.
inline int q6_at(const uint8_t* blk, int e) {
  const int n = e / 128, u = (e % 128) / 32, l = e % 32;
  const uint8_t* ql = blk + 64 * n + 32 * (u & 1);
  const uint8_t* qh = blk + 128 + 32 * n;
  const int lo = u < 2 ? (ql[l] & 0xF) : (ql[l] >> 4);
  return (lo | (((qh[l] >> (2 * u)) & 3) << 4)) - 32;
}

template <ggml_type T> void kquant_rows(const qmm_job& j) {
  constexpr bool has_min = T != ggml_type::q6_k;
  constexpr size_t bb = kq::block_bytes_of(T);
  const int32_t nb = j.k / 256;
  for (int32_t t = 0; t < j.m; ++t) {
    const uint8_t* act = j.act + static_cast<size_t>(t) * j.act_stride;
    for (int32_t r = 0; r < j.n_rows; ++r) {
      const uint8_t* w = j.w + static_cast<size_t>(r) * j.w_row_bytes;
      float acc = 0.0f;
      for (int32_t b = 0; b < nb; ++b) {
        const uint8_t* blk = w + static_cast<size_t>(b) * bb;
        const uint8_t* a = act + static_cast<size_t>(b) * kq::q8k_bytes;
        const auto* aq = reinterpret_cast<const int8_t*>(a + kq::q8k_qs);
        const float da = kq::load_f32(a);
        int32_t isum = 0, msum = 0;
        if constexpr (has_min) {
          uint64_t sc, mn;
          kq::unpack_scales(blk + 4, &sc, &mn);
          for (int s = 0; s < 8; ++s) {
            int32_t dot = 0;
            for (int e = 32 * s; e < 32 * s + 32; ++e) dot += q45_at<T == ggml_type::q5_k>(blk, e) * aq[e];
            isum += static_cast<int32_t>((sc >> (8 * s)) & 0xFF) * dot;
            const int32_t bs = kq::load_i16(a + kq::q8k_bsums + 4 * s) + kq::load_i16(a + kq::q8k_bsums + 4 * s + 2);
            msum += static_cast<int32_t>((mn >> (8 * s)) & 0xFF) * bs;
          }
          acc = kq::kq_step<true>(acc, kq::load_f16(blk), kq::load_f16(blk + 2), da, isum, msum);
        } else {
          const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
          for (int p = 0; p < 16; ++p) {
            int32_t dot = 0;
            for (int e = 16 * p; e < 16 * p + 16; ++e) dot += q6_at(blk, e) * aq[e];
            isum += sc[p] * dot;
          }
          acc = kq::kq_step<false>(acc, kq::load_f16(blk + 208), 0.0f, da, isum, 0);
        }
      }
      float& out = j.c[static_cast<size_t>(t) * j.ldc + r];
      out = j.accumulate ? out + acc : acc;
    }
  }
}

} // namespace

void qmm_kquant_scalar(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::q4_k: return kquant_rows<ggml_type::q4_k>(j);
    case ggml_type::q5_k: return kquant_rows<ggml_type::q5_k>(j);
    case ggml_type::q6_k: return kquant_rows<ggml_type::q6_k>(j);
    default: return;
  }
}

} // namespace conveyor::model
