// The rows-in-lanes layout of qmm_rl.hpp: packing (portable: once at load, or a group at a
// time for raw rows), widening a short group, and the activation corrections.
#include "model/cpu/qmm_rl.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

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

void run_groups(const qmm_job& j, int32_t off, int32_t pass, const tile_fn* tiles, tile_fn pair1) {
  const int32_t nb = j.k / 32;
  const size_t gbytes = static_cast<size_t>(kLanes) * j.w_row_bytes;
  thread_local std::vector<int32_t> corr;
  thread_local std::vector<uint8_t> scratch;
  thread_local std::vector<float> tmp;
  if (off != 0) {
    corr.resize(static_cast<size_t>(nb) * static_cast<size_t>(j.m));
    for (int32_t t = 0; t < j.m; ++t) corrections(j.act + j.act_stride * static_cast<size_t>(t), nb, off, corr.data() + static_cast<size_t>(nb) * t);
  }
  const auto io_at = [&](int32_t t0, int32_t r0) {
    return tile_io{j.act + j.act_stride * static_cast<size_t>(t0), j.act_stride,
                   off != 0 ? corr.data() + static_cast<size_t>(nb) * t0 : nullptr, nb,
                   j.c + static_cast<size_t>(j.ldc) * t0 + r0, j.ldc, j.accumulate};
  };
  // Passes of equal size (10 tokens: 5 + 5), so no pass is left with one or two tokens.
  const int32_t passes = (j.m + pass - 1) / pass, per = (j.m + passes - 1) / passes;
  const auto run_group = [&](const uint8_t* gw, int32_t r0, int rows) {
    for (int32_t t0 = 0; t0 < j.m; t0 += per) {
      const int n = std::min(per, j.m - t0);
      tile_io io = io_at(t0, r0);
      if (rows == kLanes) {
        tiles[n - 1](gw, gbytes, io);
        continue;
      }
      tmp.resize(static_cast<size_t>(n) * kLanes);
      io.c = tmp.data();
      io.ldc = kLanes;
      io.accumulate = false;
      tiles[n - 1](gw, gbytes, io);
      for (int t = 0; t < n; ++t)
        for (int r = 0; r < rows; ++r) {
          float& o = j.c[static_cast<size_t>(j.ldc) * (t0 + t) + r0 + r];
          const float v = tmp[static_cast<size_t>(t) * kLanes + r];
          o = j.accumulate ? o + v : v;
        }
    }
  };
  const int32_t full = j.packed ? j.n_rows / kLanes : 0;
  int32_t gi = 0;
  if (pair1 != nullptr && j.m == 1)  // two independent chains per block
    for (; gi + 2 <= full; gi += 2) pair1(j.w + gbytes * gi, gbytes, io_at(0, kLanes * gi));
  for (; gi < full; ++gi) run_group(j.w + gbytes * gi, kLanes * gi, kLanes);
  for (; gi * kLanes < j.n_rows; ++gi) {
    const int rows = std::min(kLanes, j.n_rows - kLanes * gi);
    scratch.resize(gbytes + 64);
    uint8_t* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    if (j.packed) widen_group(j.type, j.w + gbytes * gi, rows, nb, s);
    else pack_group(j.type, j.w + gbytes * gi, j.w_row_bytes, rows, kLanes, nb, s);
    run_group(s, kLanes * gi, rows);
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
