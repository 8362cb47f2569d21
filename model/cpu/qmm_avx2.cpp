// AVX2/FMA/F16C legacy qmm kernel (qmm_kernels.hpp). The quantized types (Q4_0 Q4_1 Q5_0 Q5_1
// Q8_0) run in qmm_avx2_q.cpp (maddubs, rows in lanes); this file holds the F32 / F16 / BF16
// tiles (R weight rows x N tokens of 8-lane f32 accumulators, 16 registers) and the dispatch.
// Compiled with target attributes: qmm_run() checks the CPU first.
// NOTE: batch invariance: every (row, token) pair runs the same float operations in the same
// lane arrangement whatever the tile.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "model/cpu/qmm_kernels.hpp"

#define CV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace conveyor::model {

void qmm_legacy_avx2_quant(const qmm_job& j);  // qmm_avx2_q.cpp

namespace {

constexpr int kRows = 2;     // tile rows for m > 1
constexpr int kToks = 4;     // tile tokens for m > 1
constexpr int kRowsM1 = 8;   // tile rows for m == 1
constexpr int kRowsMax = 8;
constexpr int kChunk = 64;   // tokens per pass over the weights: their activations stay in L2

/// One row tile: its rows.
struct rows_ctx {
  int32_t r0;  // row index of w[0]
  const uint8_t* w[kRowsMax];
};

#define QMM_TARGET CV_AVX2
#include "model/cpu/qmm_f_tile.hpp"  // hsum, store, the F32/F16/BF16 tiles
#undef QMM_TARGET

using tile_fn = void (*)(const qmm_job&, const rows_ctx&, int, int32_t);

template <ggml_type T, int R, int N> constexpr tile_fn pick() {
  if constexpr (R > kRows && N > 1) return nullptr;  // never used: wide tiles only at m == 1
  else return &tile_f<T, R, N>;
}

template <ggml_type T, size_t... I>
constexpr std::array<tile_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {{pick<T, static_cast<int>(I) / kToks + 1, static_cast<int>(I) % kToks + 1>()...}};
}

template <ggml_type T> CV_AVX2 void run(const qmm_job& j) {
  static constexpr auto table = make_table<T>(std::make_index_sequence<kRowsMax * kToks>{});
  const int rt = j.m == 1 ? kRowsM1 : kRows, nt = j.m == 1 ? 1 : kToks;
  rows_ctx rc{};
  for (int32_t tc = 0; tc < j.m; tc += kChunk) {
    const int32_t te = std::min(j.m, tc + kChunk);
    for (int32_t r0 = 0; r0 < j.n_rows; r0 += rt) {
      const int rn = std::min(rt, j.n_rows - r0);
      rc.r0 = r0;
      for (int i = 0; i < rn; ++i) rc.w[i] = j.w + static_cast<size_t>(r0 + i) * j.w_row_bytes;
      for (int32_t t0 = tc; t0 < te; t0 += nt) {
        const int tn = std::min(nt, te - t0);
        table[static_cast<size_t>((rn - 1) * kToks + tn - 1)](j, rc, 0, t0);
      }
    }
  }
}

} // namespace

void qmm_legacy_avx2(const qmm_job& j) {
  switch (j.type) {
    case ggml_type::f32: return run<ggml_type::f32>(j);
    case ggml_type::f16: return run<ggml_type::f16>(j);
    case ggml_type::bf16: return run<ggml_type::bf16>(j);
    default: return qmm_legacy_avx2_quant(j);
  }
}

} // namespace conveyor::model

#endif
