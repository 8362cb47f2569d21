// cpu_matmul: the activations quantized once per format, then (row chunk, token group) items.
#include "model/cpu/cpu_matmul.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/cpu/qgemv.hpp"
#include "model/cpu/qgemv_pool.hpp"

namespace conveyor::model {
namespace {

// Tokens per work item in long steps: each item streams its chunk of weight rows once per token
// group, and the group's activations (k bytes per token) stay in L2 across the chunk's rows.
constexpr int32_t kTokenGroup = 128;

} // namespace

const char* to_string(cpu_math m) { return m == cpu_math::exact ? "exact" : "fast"; }

cpu_math parse_cpu_math(const std::string& s) {
  if (s == "fast") return cpu_math::fast;
  if (s == "exact") return cpu_math::exact;
  throw std::invalid_argument("cpu_math must be fast or exact, not '" + s + "'");
}

cpu_matmul::cpu_matmul(cpu_math math, cpu_isa isa) : math_(math), isa_(isa) {
  if (!cpu_isa_available(isa)) throw std::invalid_argument(std::string("this CPU cannot run ") + cpu_isa_name(isa));
}

void cpu_matmul::run(spinning_pool& pool, const qmatrix& w, const float* a, int32_t m, float* c, bool accumulate) {
  if (m <= 0) return;
  if (math_ == cpu_math::exact) {
    qgemv(pool, w, a, c, m, accumulate);
    return;
  }
  const int32_t k = w.k(), n = w.rows();
  // Quantize A once per activation format the parts need.
  bool need[4] = {false, false, false, false};
  for (const qmatrix::part& p : w.parts()) need[static_cast<int>(act_format_for(p.type))] = true;
  int32_t formats[4], nf = 0;
  need[static_cast<int>(act_format::f32)] = false;  // f32 rows are read from `a` itself
  for (int f = 0; f < 4; ++f)
    if (need[f]) {
      formats[nf++] = f;
      act_[f].resize(act_row_bytes(static_cast<act_format>(f), k) * static_cast<size_t>(m));
    }
  const auto quantize = [&](int64_t i) {
    const auto f = static_cast<act_format>(formats[i % nf]);
    const auto t = static_cast<int32_t>(i / nf);
    const size_t stride = act_row_bytes(f, k);
    quantize_act_row(isa_, f, a + static_cast<size_t>(t) * k, act_[static_cast<int>(f)].data() + stride * t, k);
  };
  // A few rows are quantized inline: a fork-join costs more than they do (decode steps).
  if (int64_t{m} * nf < 8) {
    for (int64_t i = 0; i < int64_t{m} * nf; ++i) quantize(i);
  } else {
    pool.parallel_for(int64_t{m} * nf, [&](int64_t i, int32_t) { quantize(i); });
  }
  // Row chunks as qgemv's (about 16 per thread, at least 16 rows), times token groups. Chunks
  // are cut per part from the part's first row, so a chunk of packed rows starts a 16-row group
  // of its part and only a part's last chunk is not a multiple of 16 rows (qmm_job::packed).
  const int32_t per = (n + pool.size() * 16 - 1) / (pool.size() * 16);
  const int32_t chunk = std::max<int32_t>(16, (per + 15) / 16 * 16);
  chunks_.clear();
  const std::vector<qmatrix::part>& parts = w.parts();
  for (size_t pi = 0; pi < parts.size(); ++pi)
    for (int32_t lo = 0; lo < parts[pi].rows; lo += chunk) chunks_.push_back({static_cast<int32_t>(pi), lo, std::min(parts[pi].rows, lo + chunk)});
  const int64_t groups = (m + kTokenGroup - 1) / kTokenGroup;
  pool.parallel_for(static_cast<int64_t>(chunks_.size()) * groups, [&](int64_t item, int32_t) {
    const row_chunk& rc = chunks_[static_cast<size_t>(item / groups)];
    const qmatrix::part& p = parts[static_cast<size_t>(rc.part)];
    const int32_t t0 = static_cast<int32_t>(item % groups) * kTokenGroup, t1 = std::min(m, t0 + kTokenGroup);
    const act_format f = act_format_for(p.type);
    const size_t stride = act_row_bytes(f, k);
    qmm_job j;
    j.type = p.type;
    j.packed = p.packed != nullptr && w.packed_isa() == isa_;
    j.w = (j.packed ? p.packed : p.data) + static_cast<size_t>(rc.lo) * p.row_bytes;
    j.w_row_bytes = p.row_bytes;
    j.n_rows = rc.hi - rc.lo;
    j.k = k;
    j.act = f == act_format::f32 ? reinterpret_cast<const uint8_t*>(a + static_cast<size_t>(t0) * k)
                                 : act_[static_cast<int>(f)].data() + stride * t0;
    j.act_stride = stride;
    j.m = t1 - t0;
    j.c = c + static_cast<size_t>(t0) * n + p.first_row + rc.lo;
    j.ldc = n;
    j.accumulate = accumulate;
    qmm_run(isa_, j);
  });
}

} // namespace conveyor::model
