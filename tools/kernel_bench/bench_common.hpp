// Shared by the kernel microbenchmarks (tools/kernel_bench/*.cpp, one program each): a clock,
// comma-separated list flags, and best-of-repeated-runs timing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace conveyor::kernel_bench {

inline double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// "1,8,96" -> {1, 8, 96}.
inline std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  for (size_t at = 0; at < s.size();) {
    const size_t end = s.find(',', at);
    v.push_back(std::atoi(s.substr(at, end - at).c_str()));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return v;
}

/// The best seconds of one call of f over at least `min_runs` calls and `min_s` seconds.
template <class F> double best_s(F&& f, int min_runs = 5, double min_s = 0.2) {
  double best = 1e30;
  const double start = now_s();
  for (int it = 0; it < min_runs || now_s() - start < min_s; ++it) {
    const double t0 = now_s();
    f();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

} // namespace conveyor::kernel_bench
