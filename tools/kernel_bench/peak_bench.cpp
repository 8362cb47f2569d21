// peak-bench: the ceilings the CPU kernels are measured against, on one thread: the rate of the
// integer dot instructions (AVX-512 VNNI vpdpbusd on 512- and 256-bit vectors, AVX2 maddubs) and
// of 256- and 512-bit FMAs, each as 12 independent accumulator chains (enough to cover their
// latency), in multiply-adds per second: what this host does, whatever its documentation says
// (the count of ports per instruction varies by part, and a VM's clock moves with its neighbours).
//   peak-bench [--json FILE]
// Timing: the best of repeated runs (at least 5 and 0.2 s) of 2^22 iterations.
// NOTE: GCC 12's AVX-512 headers self-initialise their "undefined" vectors (GCC PR105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstdio>
#include <string>

#include "model/cpu/qmm.hpp"
#include "tools/kernel_bench/bench_common.hpp"

namespace {

constexpr int kChains = 12;
constexpr long kIters = 1L << 22;

#define PB_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni"), noinline))
#define PB_AVX2 __attribute__((target("avx2,fma"), noinline))

// Each loop keeps `x` opaque to the compiler so the chains cannot be folded.
PB_AVX512 int32_t dpbusd512(long n) {
  __m512i a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_epi32(i);
  __m512i x = _mm512_set1_epi8(3);
  const __m512i y = _mm512_set1_epi8(5);
  for (long k = 0; k < n; ++k) {
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_dpbusd_epi32(a[i], x, y);
    __asm__ volatile("" : "+v"(x));
  }
  __m512i s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, a[i]);
  return _mm512_reduce_add_epi32(s);
}

PB_AVX512 int32_t dpbusd256(long n) {
  __m256i a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_epi32(i);
  __m256i x = _mm256_set1_epi8(3);
  const __m256i y = _mm256_set1_epi8(5);
  for (long k = 0; k < n; ++k) {
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_dpbusd_epi32(a[i], x, y);
    __asm__ volatile("" : "+v"(x));
  }
  __m256i s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi32(s, a[i]);
  return _mm256_extract_epi32(s, 0);
}

PB_AVX2 int32_t maddubs256(long n) {  // u8 x s8 pairs to int16: 32 multiply-adds an instruction
  __m256i a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_epi16(static_cast<int16_t>(i));
  __m256i y = _mm256_set1_epi8(1);
  // Each chain feeds its own result back as the unsigned bytes: a shared maddubs(x, y) added to
  // every chain would be computed once an iteration (GCC did: one maddubs and 12 adds).
  for (long k = 0; k < n; ++k) {
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_maddubs_epi16(a[i], y);
    __asm__ volatile("" : "+v"(y));
  }
  __m256i s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_epi16(s, a[i]);
  return _mm256_extract_epi16(s, 0);
}

PB_AVX512 float fma512(long n) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(0.001f * i);
  __m512 x = _mm512_set1_ps(0.5f);
  const __m512 y = _mm512_set1_ps(0.25f);
  for (long k = 0; k < n; ++k) {
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);  // converges: no overflow
    __asm__ volatile("" : "+v"(x));
  }
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

PB_AVX2 float fma256(long n) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(0.001f * i);
  __m256 x = _mm256_set1_ps(0.5f);
  const __m256 y = _mm256_set1_ps(0.25f);
  for (long k = 0; k < n; ++k) {
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
    __asm__ volatile("" : "+v"(x));
  }
  __m256 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, a[i]);
  float o[8];
  _mm256_storeu_ps(o, s);
  return o[0];
}

} // namespace

int main(int argc, char** argv) {
  using namespace conveyor::model;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: peak-bench [--json FILE]\n");
      return 2;
    }
  }
  struct row { const char* name; int macs; bool avx512; double (*run)(); };
  static volatile double sink = 0;
  const row rows[] = {
      {"vpdpbusd zmm", 64, true, [] { return conveyor::kernel_bench::best_s([] { sink = sink + dpbusd512(kIters); }); }},
      {"vpdpbusd ymm", 32, true, [] { return conveyor::kernel_bench::best_s([] { sink = sink + dpbusd256(kIters); }); }},
      {"vpmaddubsw ymm", 32, false, [] { return conveyor::kernel_bench::best_s([] { sink = sink + maddubs256(kIters); }); }},
      {"vfmadd zmm (f32)", 16, true, [] { return conveyor::kernel_bench::best_s([] { sink = sink + fma512(kIters); }); }},
      {"vfmadd ymm (f32)", 8, false, [] { return conveyor::kernel_bench::best_s([] { sink = sink + fma256(kIters); }); }},
  };
  const bool has512 = cpu_isa_available(cpu_isa::avx512), has2 = cpu_isa_available(cpu_isa::avx2);
  std::string js = "[";
  std::printf("%-18s %14s %12s\n", "instruction", "G instr/s", "GMAC/s");
  for (const row& r : rows) {
    if ((r.avx512 && !has512) || (!r.avx512 && !has2)) {
      std::printf("%-18s %14s %12s\n", r.name, "-", "(no ISA)");
      continue;
    }
    const double s = r.run();
    const double gi = static_cast<double>(kChains) * kIters / s / 1e9;
    std::printf("%-18s %14.2f %12.1f\n", r.name, gi, gi * r.macs);
    js += std::string(js.size() > 1 ? "," : "") + "{\"instruction\":\"" + r.name + "\",\"g_instr_s\":" + std::to_string(gi) +
          ",\"gmac_s\":" + std::to_string(gi * r.macs) + "}";
  }
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "peak-bench: cannot write %s\n", json);
      return 1;
    }
    std::fprintf(f, "%s]\n", js.c_str());
    std::fclose(f);
  }
  return 0;
}
