#include "model/cpu/cpu_cores.hpp"

#include <algorithm>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <thread>

namespace conveyor::model {

int32_t cgroup_quota_cores(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  long long q = 0;
  try {
    size_t used = 0;
    q = std::stoll(quota, &used);
    if (used != quota.size() || q <= 0) return 0;
  } catch (const std::exception&) {
    return 0;
  }
  return static_cast<int32_t>(std::min<long long>((q + period - 1) / period, 1 << 20));
}

namespace {

// The cgroup v2 quota of this process's own cgroup (0: none or not cgroup v2).
int32_t own_cgroup_quota() {
  std::ifstream cg("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) return 0;
  // The limit may sit on any ancestor; the tightest one counts.
  int32_t best = 0;
  for (;;) {
    std::ifstream f("/sys/fs/cgroup" + (path == "/" ? std::string() : path) + "/cpu.max");
    std::string text;
    if (f && std::getline(f, text)) {
      const int32_t q = cgroup_quota_cores(text);
      if (q > 0) best = best == 0 ? q : std::min(best, q);
    }
    if (path == "/" || path.empty()) break;
    const auto slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

} // namespace

int32_t usable_cores() {
  int32_t n = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = std::max(1, CPU_COUNT(&set));
  const int32_t quota = own_cgroup_quota();
  if (quota > 0) n = std::min(n, quota);
  return n;
}

} // namespace conveyor::model
