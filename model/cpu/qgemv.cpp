// qgemv dispatch: CPU feature check, the split of a matrix's rows into per-part kernel runs,
// and the split of the rows over the thread pool.
#include "model/cpu/qgemv.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/cpu/qgemv_kernels.hpp"
#include "model/cpu/qgemv_pool.hpp"

namespace conveyor::model {

bool qgemv_isa_available(qgemv_isa isa) {
  if (isa == qgemv_isa::scalar) return true;
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return avx2;
#else
  return false;
#endif
}

qgemv_isa qgemv_best_isa() { return qgemv_isa_available(qgemv_isa::avx2) ? qgemv_isa::avx2 : qgemv_isa::scalar; }

void qgemv_rows(qgemv_isa isa, const qmatrix& w, const float* a, float* c, int32_t m, bool accumulate,
                int32_t r0, int32_t r1) {
  if (!qgemv_isa_available(isa)) throw std::invalid_argument("qgemv: this CPU lacks AVX2/FMA/F16C");
  for (const qmatrix::part& p : w.parts()) {
    const int32_t lo = std::max(r0, p.first_row), hi = std::min(r1, p.first_row + p.rows);
    if (lo >= hi) continue;
    const qgemv_run run{p.type,      p.data + static_cast<size_t>(lo - p.first_row) * p.row_bytes,
                        p.row_bytes, hi - lo,
                        w.k(),       a,
                        m,           c + lo,
                        w.rows(),    accumulate};
#if defined(__x86_64__) || defined(__i386__)
    if (isa == qgemv_isa::avx2 && qgemv_supports(p.type)) {
      qgemv_run_avx2(run);
      continue;
    }
#endif
    qgemv_run_scalar(run);
  }
}

void qgemv(spinning_pool& pool, const qmatrix& w, const float* a, float* c, int32_t m, bool accumulate, qgemv_isa isa) {
  // Chunks of rows handed out one at a time: about 16 per thread balances a core that another
  // process slows down; at least 16 rows so the hand-out cost stays small.
  const int32_t n = w.rows();
  const int32_t per = (n + pool.size() * 16 - 1) / (pool.size() * 16);
  const int32_t chunk = std::max<int32_t>(16, (per + 15) / 16 * 16);
  const int64_t items = (n + chunk - 1) / chunk;
  pool.parallel_for(items, [&](int64_t i, int32_t) {
    const int32_t r0 = static_cast<int32_t>(i) * chunk;
    qgemv_rows(isa, w, a, c, m, accumulate, r0, std::min(n, r0 + chunk));
  });
}

} // namespace conveyor::model
