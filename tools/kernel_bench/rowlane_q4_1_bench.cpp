// rowlane-q4-1-bench: a measured prototype for the next Q4_1 float order, against the kernels of
// today, single thread, AVX-512 VNNI. Not used by the executor.
//
// Today every Q4_0/Q4_1/Q5_x/Q8_0 path sums a (row, token) in 8 lanes of blocks (a float step per
// 8-block group, then a horizontal sum; qmm_avx512_q.cpp). At 2-8 tokens (a speculative
// verification) that costs ~40 vector instructions per (row, token) of a 576-wide row, 9 of them
// vpdpbusd (docs/benchmarks.md, "Where a verification step's time goes"). The prototype puts
// rows in lanes instead: 16 rows' blocks interleaved by dword at pack time, so a vpdpbusd with
// the token's 4 activation bytes broadcast gives 16 rows' partial dots, a block's float step
// (acc = fma(cvt(isum), d * da, acc); acc = fma(m, s, acc)) serves 16 (row, token) pairs, and
// no horizontal sum is left. A (row, token) then sums its blocks in order, one fma pair each:
// an order any ISA and any step size can keep (checked here against a scalar loop, bit for bit).
//   rowlane-q4-1-bench [--m 1,2,4,6,8,9] [--json FILE]
// Timing: the best of repeated runs (at least 5 and 0.2 s). Exits 1 if a check fails.
// NOTE: GCC 12's AVX-512 headers self-initialise their "undefined" vectors (GCC PR105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "model/cpu/qmm.hpp"
#include "model/cpu/qmm_kernels.hpp"
#include "model/formats/dequant.hpp"
#include "tools/kernel_bench/bench_common.hpp"

using namespace conveyor::model;

#define RL_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace {

constexpr int kBlockBytes = 20;  // Q4_1: f16 d, f16 m, 16 bytes of nibbles

uint64_t g_state = 0x9E3779B97F4A7C15ull;
uint64_t next_u64() {
  g_state ^= g_state >> 12;
  g_state ^= g_state << 25;
  g_state ^= g_state >> 27;
  return g_state * 0x2545F4914F6CDD1Dull;
}
float next_f() { return static_cast<float>(next_u64() >> 40) / static_cast<float>(1 << 24) - 0.5f; }
uint16_t f16(float x) { return _cvtss_sh(x, 0); }
float f32(uint16_t h) { return _cvtsh_ss(h); }

/// Rows in groups of 16; per group and block: 4 x 64 bytes (vector i, lane r = row r's nibble
/// bytes 4i..4i+3), then 16 f16 scales and 16 f16 mins. n a multiple of 16.
std::vector<uint8_t> pack_rowlane(const uint8_t* raw, int32_t n, int32_t k) {
  const int32_t nb = k / 32;
  std::vector<uint8_t> out(static_cast<size_t>(n) * nb * kBlockBytes);
  uint8_t* o = out.data();
  for (int32_t g = 0; g < n / 16; ++g)
    for (int32_t b = 0; b < nb; ++b) {
      for (int i = 0; i < 4; ++i)
        for (int r = 0; r < 16; ++r) std::memcpy(o + 64 * i + 4 * r, raw + (static_cast<size_t>(g * 16 + r) * nb + b) * kBlockBytes + 4 + 4 * i, 4);
      for (int r = 0; r < 16; ++r) {
        const uint8_t* blk = raw + (static_cast<size_t>(g * 16 + r) * nb + b) * kBlockBytes;
        std::memcpy(o + 256 + 2 * r, blk, 2);
        std::memcpy(o + 288 + 2 * r, blk + 2, 2);
      }
      o += 16 * kBlockBytes;
    }
  return out;
}

/// The prototype's order, one (row, token) at a time: blocks in order, int dot, then
/// acc = fma(float(isum), d * da, acc); acc = fma(m, s, acc).
float scalar_rowlane(const uint8_t* row, const uint8_t* act, int32_t k) {
  const int32_t nb = k / 32;
  const auto* qa = reinterpret_cast<const int8_t*>(act);
  const float* da = reinterpret_cast<const float*>(act + 32 * static_cast<size_t>(nb));
  const float* sa = da + nb;
  float acc = 0.0f;
  for (int32_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + static_cast<size_t>(b) * kBlockBytes;
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) isum += (blk[4 + j] & 15) * qa[32 * b + j] + (blk[4 + j] >> 4) * qa[32 * b + 16 + j];
    uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    acc = std::fma(static_cast<float>(isum), f32(dh) * da[b], acc);
    acc = std::fma(f32(mh), sa[b], acc);
  }
  return acc;
}

/// G groups of 16 rows (from group g) x N tokens (activation rows `astride` apart), into c (ldc
/// floats a token). G = 2 at one token gives the fma chains of two groups to interleave.
template <int G, int N>
RL_AVX512 void rowlane_tile(const uint8_t* w, int32_t nb, const uint8_t* act, size_t astride, int32_t g, float* c, int32_t ldc) {
  const size_t gbytes = static_cast<size_t>(nb) * 16 * kBlockBytes;
  const uint8_t* p = w + static_cast<size_t>(g) * gbytes;
  __m512 acc[G][N];
  const int32_t* qa[N];
  const float* da[N];
  for (int t = 0; t < N; ++t) {
    for (int x = 0; x < G; ++x) acc[x][t] = _mm512_setzero_ps();
    qa[t] = reinterpret_cast<const int32_t*>(act + astride * t);
    da[t] = reinterpret_cast<const float*>(act + astride * t + 32 * static_cast<size_t>(nb));
  }
  const __m512i nib = _mm512_set1_epi8(0x0F);
  for (int32_t b = 0; b < nb; ++b, p += 16 * kBlockBytes) {
    __m512i lo[G][4], hi[G][4];
    __m512 dw[G], mw[G];
    for (int x = 0; x < G; ++x) {
      const uint8_t* q = p + x * gbytes;
      for (int i = 0; i < 4; ++i) {
        const __m512i v = _mm512_loadu_si512(q + 64 * i);
        lo[x][i] = _mm512_and_si512(v, nib);
        hi[x][i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
      }
      dw[x] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 256)));
      mw[x] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 288)));
    }
    for (int t = 0; t < N; ++t) {
      const int32_t* q = qa[t] + 8 * b;
      const __m512 d = _mm512_set1_ps(da[t][b]), sm = _mm512_set1_ps(da[t][nb + b]);
      for (int x = 0; x < G; ++x) {
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        s0 = _mm512_dpbusd_epi32(s0, lo[x][0], _mm512_set1_epi32(q[0]));
        s1 = _mm512_dpbusd_epi32(s1, lo[x][1], _mm512_set1_epi32(q[1]));
        s0 = _mm512_dpbusd_epi32(s0, lo[x][2], _mm512_set1_epi32(q[2]));
        s1 = _mm512_dpbusd_epi32(s1, lo[x][3], _mm512_set1_epi32(q[3]));
        s0 = _mm512_dpbusd_epi32(s0, hi[x][0], _mm512_set1_epi32(q[4]));
        s1 = _mm512_dpbusd_epi32(s1, hi[x][1], _mm512_set1_epi32(q[5]));
        s0 = _mm512_dpbusd_epi32(s0, hi[x][2], _mm512_set1_epi32(q[6]));
        s1 = _mm512_dpbusd_epi32(s1, hi[x][3], _mm512_set1_epi32(q[7]));
        const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
        acc[x][t] = _mm512_fmadd_ps(f, _mm512_mul_ps(dw[x], d), acc[x][t]);
        acc[x][t] = _mm512_fmadd_ps(mw[x], sm, acc[x][t]);
      }
    }
  }
  for (int x = 0; x < G; ++x)
    for (int t = 0; t < N; ++t) _mm512_storeu_ps(c + static_cast<size_t>(t) * ldc + 16 * (g + x), acc[x][t]);
}

using tile_fn = void (*)(const uint8_t*, int32_t, const uint8_t*, size_t, int32_t, float*, int32_t);
constexpr tile_fn kTiles[8] = {rowlane_tile<1, 1>, rowlane_tile<1, 2>, rowlane_tile<1, 3>, rowlane_tile<1, 4>,
                               rowlane_tile<1, 5>, rowlane_tile<1, 6>, rowlane_tile<1, 7>, rowlane_tile<1, 8>};

/// Group by group (its rows stay in L1/L2 across the token passes), passes of up to 8 tokens;
/// one token takes two groups at a time.
void rowlane(const uint8_t* w, int32_t n, int32_t k, const uint8_t* act, size_t astride, int32_t m, float* c) {
  const int32_t nb = k / 32, groups = n / 16;
  if (m == 1) {
    int32_t g = 0;
    for (; g + 2 <= groups; g += 2) rowlane_tile<2, 1>(w, nb, act, astride, g, c, n);
    if (g < groups) rowlane_tile<1, 1>(w, nb, act, astride, g, c, n);
    return;
  }
  const int32_t passes = (m + 7) / 8, per = (m + passes - 1) / passes;
  for (int32_t g = 0; g < groups; ++g)
    for (int32_t t0 = 0; t0 < m; t0 += per) {
      const int32_t tn = std::min(per, m - t0);
      kTiles[tn - 1](w, nb, act + astride * t0, astride, g, c + static_cast<size_t>(t0) * n, n);
    }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ms = {1, 2, 4, 6, 8, 9};
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--m" && i + 1 < argc) ms = conveyor::kernel_bench::parse_list(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: rowlane-q4-1-bench [--m 1,2,4,6,8,9] [--json FILE]\n");
      return 2;
    }
  }
  if (!cpu_isa_available(cpu_isa::avx512)) {
    std::fprintf(stderr, "rowlane-q4-1-bench: this CPU has no AVX-512 VNNI; nothing to measure\n");
    return 2;
  }
  struct shape { const char* name; int32_t k, n; };
  const shape shapes[] = {{"smol.qkv", 576, 960}, {"smol.up", 576, 3072}, {"smol.down", 1536, 576}, {"l3.attn", 4096, 4096}};
  std::string js = "[";
  bool ok = true;
  std::printf("%-10s %5s %6s %3s %12s %12s %8s %10s\n", "shape", "k", "n", "m", "today us", "rowlane us", "ratio", "max |diff|");
  for (const shape& s : shapes) {
    const int32_t nb = s.k / 32;
    std::vector<uint8_t> raw(static_cast<size_t>(s.n) * nb * kBlockBytes);
    for (size_t b = 0; b < raw.size() / kBlockBytes; ++b) {
      uint8_t* blk = raw.data() + b * kBlockBytes;
      const uint16_t d = f16(0.01f + 0.02f * std::abs(next_f())), mn = f16(-0.1f * std::abs(next_f()));
      std::memcpy(blk, &d, 2);
      std::memcpy(blk + 2, &mn, 2);
      for (int j = 0; j < 16; ++j) blk[4 + j] = static_cast<uint8_t>(next_u64());
    }
    std::vector<uint8_t> packed(raw.size());
    qmm_pack_rows(cpu_isa::avx512, ggml_type::q4_1, raw.data(), s.n, s.k, packed.data());
    const std::vector<uint8_t> rl = pack_rowlane(raw.data(), s.n, s.k);
    const int32_t max_m = *std::max_element(ms.begin(), ms.end());
    const size_t astride = act_row_bytes(act_format::q8_1, s.k);
    std::vector<uint8_t> act(astride * max_m);
    std::vector<float> x(static_cast<size_t>(s.k));
    for (int32_t t = 0; t < max_m; ++t) {
      for (float& v : x) v = 4.0f * next_f();
      quantize_act_row(cpu_isa::avx512, act_format::q8_1, x.data(), act.data() + astride * t, s.k);
    }
    for (int32_t m : ms) {
      std::vector<float> today(static_cast<size_t>(m) * s.n), mine(today.size());
      qmm_job j;
      j.type = ggml_type::q4_1;
      j.w = packed.data();
      j.w_row_bytes = static_cast<size_t>(nb) * kBlockBytes;
      j.n_rows = s.n;
      j.k = s.k;
      j.act = act.data();
      j.act_stride = astride;
      j.m = m;
      j.c = today.data();
      j.ldc = s.n;
      j.packed = true;
      const double t_today = 1e3 * conveyor::kernel_bench::best_s([&] { qmm_run(cpu_isa::avx512, j); });
      const double t_mine = 1e3 * conveyor::kernel_bench::best_s([&] { rowlane(rl.data(), s.n, s.k, act.data(), astride, m, mine.data()); });
      double diff = 0;
      for (int32_t t = 0; t < m; ++t)
        for (int32_t r = 0; r < s.n; ++r) {
          const float want = scalar_rowlane(raw.data() + static_cast<size_t>(r) * nb * kBlockBytes, act.data() + astride * t, s.k);
          const float got = mine[static_cast<size_t>(t) * s.n + r];
          if (std::memcmp(&want, &got, sizeof want) != 0) {
            if (ok) std::fprintf(stderr, "rowlane-q4-1-bench: %s m=%d token %d row %d: %.9g, scalar order %.9g\n", s.name, m, t, r, got, want);
            ok = false;
          }
          diff = std::max(diff, static_cast<double>(std::abs(got - today[static_cast<size_t>(t) * s.n + r])));
        }
      std::printf("%-10s %5d %6d %3d %12.2f %12.2f %7.2fx %10.2e\n", s.name, s.k, s.n, m, t_today * 1e3, t_mine * 1e3, t_today / t_mine, diff);
      std::fflush(stdout);
      js += std::string(js.size() > 1 ? "," : "") + "{\"shape\":\"" + s.name + "\",\"k\":" + std::to_string(s.k) + ",\"n\":" + std::to_string(s.n) +
            ",\"m\":" + std::to_string(m) + ",\"today_us\":" + std::to_string(t_today * 1e3) + ",\"rowlane_us\":" + std::to_string(t_mine * 1e3) + "}";
    }
  }
  if (json) {
    if (FILE* f = std::fopen(json, "w")) {
      std::fprintf(f, "%s]\n", js.c_str());
      std::fclose(f);
    } else {
      std::fprintf(stderr, "rowlane-q4-1-bench: cannot write %s\n", json);
      return 1;
    }
  }
  if (!ok) std::fprintf(stderr, "rowlane-q4-1-bench: the prototype does not follow its scalar order\n");
  return ok ? 0 : 1;
}
