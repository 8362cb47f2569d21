// The rows-in-lanes layout of qmm_rl.hpp: packing (portable: once at load, or a group at a
// time for raw rows), widening a short group, and the activation corrections.
#include "model/cpu/qmm_rl.hpp"

#include <cstring>

#include "model/cpu/qmm_kernels.hpp"

namespace conveyor::model {
namespace qmmrl {

void pack_group(ggml_type t, const uint8_t* src, size_t row_bytes, int R, int L, int32_t nb, uint8_t* dst) {
  const geom g = geom_of(t);
  const size_t blk = static_cast<size_t>(L) * g.bytes;
  for (int32_t b = 0; b < nb; ++b) {
    uint8_t* o = dst + blk * static_cast<size_t>(b);
    std::memset(o, 0, blk);
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = src + row_bytes * static_cast<size_t>(r) + static_cast<size_t>(g.bytes) * b;
      for (int i = 0; i < g.vecs; ++i) std::memcpy(o + 4 * (static_cast<size_t>(L) * i + r), p + g.raw_qs + 4 * i, 4);
      if (g.qh) std::memcpy(o + qh_at(g, L) + 4 * r, p + g.raw_qh, 4);
      std::memcpy(o + d_at(g, L) + 2 * r, p, 2);
      if (g.min) std::memcpy(o + m_at(g, L) + 2 * r, p + g.raw_m, 2);
    }
  }
}

void widen_group(ggml_type t, const uint8_t* src, int R, int32_t nb, uint8_t* dst) {
  const geom g = geom_of(t);
  const size_t in = static_cast<size_t>(R) * g.bytes, out = static_cast<size_t>(kLanes) * g.bytes;
  for (int32_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + in * static_cast<size_t>(b);
    uint8_t* o = dst + out * static_cast<size_t>(b);
    std::memset(o, 0, out);
    for (int i = 0; i < g.vecs; ++i) std::memcpy(o + 4 * kLanes * static_cast<size_t>(i), p + 4 * static_cast<size_t>(R) * i, 4 * static_cast<size_t>(R));
    if (g.qh) std::memcpy(o + qh_at(g, kLanes), p + qh_at(g, R), 4 * static_cast<size_t>(R));
    std::memcpy(o + d_at(g, kLanes), p + d_at(g, R), 2 * static_cast<size_t>(R));
    if (g.min) std::memcpy(o + m_at(g, kLanes), p + m_at(g, R), 2 * static_cast<size_t>(R));
  }
}

void corrections(const uint8_t* act_qs, int32_t nb, int32_t off, int32_t* corr) {
  const auto* q = reinterpret_cast<const int8_t*>(act_qs);
  for (int32_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += q[32 * b + i];
    corr[b] = -off * s;
  }
}

} // namespace qmmrl

void qmm_legacy_pack(ggml_type t, const uint8_t* src, int32_t rows, int32_t k, uint8_t* dst) {
  const int32_t nb = k / 32;
  const size_t rb = static_cast<size_t>(nb) * qmmrl::geom_of(t).bytes;
  for (int32_t r0 = 0; r0 < rows; r0 += qmmrl::kLanes) {
    const int R = rows - r0 < qmmrl::kLanes ? rows - r0 : qmmrl::kLanes;
    qmmrl::pack_group(t, src + rb * static_cast<size_t>(r0), rb, R, R, nb, dst + rb * static_cast<size_t>(r0));
  }
}

} // namespace conveyor::model
