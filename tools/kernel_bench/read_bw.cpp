// read-bw: the memory read bandwidth a decode step can hope for, the denominator of issue 32's
// "fraction of the bandwidth floor" (floor = weight bytes per token / read bandwidth). Each of
// 1..N threads sums its own slice of one buffer with 256-bit loads (portable: the compiler's
// vector extension, no ISA flags), buffers from L2-sized to well past the last-level cache:
//   read-bw [--threads N] [--mb 1,8,96,800] [--json FILE]
// Timing: the best of repeated passes (at least 5 and 0.3 s); the buffer is written before the
// first pass so its pages are resident. A checksum is printed so the reads cannot be elided.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tools/kernel_bench/bench_common.hpp"

namespace {

using conveyor::kernel_bench::now_s;
using conveyor::kernel_bench::parse_list;

typedef uint64_t v4u64 __attribute__((vector_size(32)));

uint64_t sum_slice(const v4u64* p, size_t n) {
  v4u64 a = {0, 0, 0, 0}, b = a, c = a, d = a;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  const v4u64 s = a + b + c + d;
  return s[0] + s[1] + s[2] + s[3];
}

}  // namespace

int main(int argc, char** argv) {
  int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> mbs = {1, 8, 96, 800};
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) max_threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--mb" && i + 1 < argc) mbs = parse_list(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else { std::fprintf(stderr, "usage: read-bw [--threads N] [--mb 1,8,96,800] [--json FILE]\n"); return 2; }
  }
  std::string rows;
  uint64_t check = 0;
  std::printf("%8s %8s %10s\n", "MB", "threads", "GB/s");
  for (int mb : mbs) {
    if (mb <= 0) continue;
    const size_t bytes = static_cast<size_t>(mb) << 20, n = bytes / sizeof(v4u64);
    auto* buf = static_cast<v4u64*>(std::aligned_alloc(64, bytes));
    if (buf == nullptr) { std::fprintf(stderr, "read-bw: cannot allocate %d MB\n", mb); return 1; }
    std::memset(buf, 1, bytes);
    for (int th = 1; th <= max_threads; ++th) {
      double best = 1e30;
      const double start = now_s();
      for (int it = 0; it < 5 || now_s() - start < 0.3; ++it) {
        std::vector<uint64_t> sums(static_cast<size_t>(th));
        std::vector<std::thread> pool;
        const size_t per = n / static_cast<size_t>(th) / 4 * 4;
        const double t0 = now_s();
        for (int t = 1; t < th; ++t) pool.emplace_back([&, t] { sums[t] = sum_slice(buf + per * t, per); });
        sums[0] = sum_slice(buf, per);
        for (std::thread& w : pool) w.join();
        best = std::min(best, now_s() - t0);
        for (uint64_t s : sums) check += s;
        if (it > 2000) break;
      }
      const double gbs = static_cast<double>(n / static_cast<size_t>(th) / 4 * 4 * th) * sizeof(v4u64) / best / 1e9;
      std::printf("%8d %8d %10.1f\n", mb, th, gbs);
      char row[128];
      std::snprintf(row, sizeof row, "%s  {\"mb\":%d,\"threads\":%d,\"gbs\":%.2f}", rows.empty() ? "" : ",\n", mb, th, gbs);
      rows += row;
    }
    std::free(buf);
  }
  std::printf("checksum %llu\n", static_cast<unsigned long long>(check));
  if (json) {
    FILE* fp = std::fopen(json, "w");
    if (!fp) { std::perror(json); return 1; }
    std::fprintf(fp, "[\n%s\n]\n", rows.c_str());
    std::fclose(fp);
  }
  return 0;
}
