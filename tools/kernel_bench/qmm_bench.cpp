// qmm_bench: times qmm_run() for the legacy weight types (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0)
// on every available ISA, m in {1, 8, 32, 128, 512}, on SmolLM2-135M shapes (k=576: 960, 576,
// 3072 rows; k=1536: 576 rows) and Llama-3-8B shapes (k=4096: 4096, 14336 rows). Single thread,
// plus a 2-thread row split at m = 1 and 128. Prints a table; --json FILE writes the rows. Where
// the ISA has a packed layout for the type (qmm_packs), rows "<isa>+pk" time the packed weights.
//   qmm_bench [--json FILE] [--quick] [--type Q4_1] [--isa avx512] [--max-ops 2e10] [--m 2,4,10]
// Timing: the best of repeated runs (at least 3 and 0.15 s). GB/s counts weight bytes read once
// per call; GOP/s counts 2*m*n*k. Scalar runs above 3e8 multiply-adds are skipped (minutes).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "model/cpu/qmm.hpp"
#include "model/formats/dequant.hpp"

using namespace conveyor::model;

namespace {

struct shape { const char* name; int32_t k, n; };
const shape kShapes[] = {{"smol.qkv", 576, 960},  {"smol.o", 576, 576},  {"smol.up", 576, 3072},
                         {"smol.down", 1536, 576}, {"l3.attn", 4096, 4096}, {"l3.up", 4096, 14336}};
const ggml_type kTypes[] = {ggml_type::f32,  ggml_type::f16,  ggml_type::bf16, ggml_type::q4_0,
                            ggml_type::q4_1, ggml_type::q5_0, ggml_type::q5_1, ggml_type::q8_0};
std::vector<int32_t> g_ms = {1, 8, 32, 128, 512};  // --m replaces them (each <= 512)

uint64_t g_state = 0x9E3779B97F4A7C15ull;
uint64_t next_u64() {  // xorshift64*: fast enough to fill 200 MB of weights
  g_state ^= g_state >> 12;
  g_state ^= g_state << 25;
  g_state ^= g_state >> 27;
  return g_state * 0x2545F4914F6CDD1Dull;
}
float next_f() { return static_cast<float>(next_u64() >> 40) / static_cast<float>(1 << 24) - 0.5f; }

std::vector<uint8_t> make_weights(ggml_type t, int32_t n, int32_t k) {
  const size_t bytes = static_cast<size_t>(n) * k / block_elems(t) * block_bytes(t);
  std::vector<uint8_t> w(bytes);
  if (t == ggml_type::f32 || t == ggml_type::f16 || t == ggml_type::bf16) {
    const size_t es = block_bytes(t);
    for (size_t i = 0; i < bytes; i += es) {
      const float x = 0.1f * next_f();
      uint16_t h = t == ggml_type::f16 ? fp32_to_fp16(x) : fp32_to_bf16(x);
      std::memcpy(&w[i], es == 4 ? static_cast<const void*>(&x) : &h, es);
    }
    return w;
  }
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = next_u64();
    std::memcpy(&w[i], &v, 8);
  }
  const uint16_t d = fp32_to_fp16(0.01f);
  for (size_t i = 0; i < bytes; i += block_bytes(t)) std::memcpy(&w[i], &d, 2);
  return w;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Best seconds per call of f over at least 3 runs and min_s seconds.
template <class F> double best_time(F&& f, double min_s) {
  double best = 1e30, start = now_s();
  for (int it = 0; it < 3 || now_s() - start < min_s; ++it) {
    const double t0 = now_s();
    f();
    best = std::min(best, now_s() - t0);
    if (it > 1000) break;
  }
  return best;
}

struct result { std::string type, isa, shape; int32_t k, n, m; double ms, gbs, gops, ms2; };

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  std::string only_type, only_isa;
  double max_ops = 3.1e10, min_s = 0.15;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--quick") { max_ops = 3e9; min_s = 0.05; }
    else if (a == "--type" && i + 1 < argc) only_type = argv[++i];
    else if (a == "--isa" && i + 1 < argc) only_isa = argv[++i];
    else if (a == "--max-ops" && i + 1 < argc) max_ops = std::atof(argv[++i]);
    else if (a == "--m" && i + 1 < argc) {
      g_ms.clear();
      for (const char* p = argv[++i]; *p;) {
        char* end = nullptr;
        const long v = std::strtol(p, &end, 10);
        if (end == p || v < 1 || v > 512) { std::fprintf(stderr, "qmm_bench: --m takes token counts 1..512, comma-separated\n"); return 2; }
        g_ms.push_back(static_cast<int32_t>(v));
        p = *end == ',' ? end + 1 : end;
      }
    } else { std::fprintf(stderr, "usage: qmm_bench [--json FILE] [--quick] [--type T] [--isa I] [--max-ops N] [--m M,M,...]\n"); return 2; }
  }
  std::vector<result> out;
  std::printf("%-5s %-9s %-9s %5s %6s %4s %10s %8s %8s %10s\n", "type", "isa", "shape", "k", "n", "m", "ms", "GB/s",
              "GOP/s", "ms(2thr)");
  for (ggml_type t : kTypes) {
    if (!only_type.empty() && only_type != type_name(t)) continue;
    const act_format f = act_format_for(t);
    for (const shape& s : kShapes) {
      const std::vector<uint8_t> w = make_weights(t, s.n, s.k);
      const size_t wrow = w.size() / static_cast<size_t>(s.n), stride = act_row_bytes(f, s.k);
      std::vector<float> x(static_cast<size_t>(512) * s.k);
      for (float& v : x) v = next_f();
      std::vector<uint8_t> act(stride * 512);
      for (int32_t i = 0; i < 512; ++i) quantize_act_row(cpu_isa::scalar, f, &x[static_cast<size_t>(i) * s.k], &act[stride * i], s.k);
      std::vector<float> c(static_cast<size_t>(512) * s.n);
      std::vector<uint8_t> wp;
      for (cpu_isa isa : {cpu_isa::scalar, cpu_isa::avx2, cpu_isa::avxvnni, cpu_isa::avx512})
      for (bool packed : {false, true}) {
        if (!cpu_isa_available(isa) || (!only_isa.empty() && only_isa != cpu_isa_name(isa))) continue;
        if (packed && !qmm_packs(isa, t)) continue;
        if (packed) {
          wp.resize(w.size());
          qmm_pack_rows(isa, t, w.data(), s.n, s.k, wp.data());
        }
        const std::vector<uint8_t>& wv = packed ? wp : w;
        const std::string isa_name = std::string(cpu_isa_name(isa)) + (packed ? "+pk" : "");
        for (int32_t m : g_ms) {
          const double macs = static_cast<double>(m) * s.n * s.k;
          if (macs > (isa == cpu_isa::scalar ? 3e8 : max_ops)) continue;
          qmm_job j{t, wv.data(), wrow, s.n, s.k, act.data(), stride, m, c.data(), s.n, false, packed};
          const double sec = best_time([&] { qmm_run(isa, j); }, min_s);
          double sec2 = 0.0;
          if (m == 1 || m == 128) {
            sec2 = best_time([&] {
              qmm_job a = j, b = j;
              a.n_rows = s.n / 32 * 16;  // packed rows split on a 16-row group (qmm_job::packed)
              b.n_rows = s.n - a.n_rows;
              b.w = wv.data() + wrow * static_cast<size_t>(a.n_rows);
              b.c = c.data() + a.n_rows;
              std::thread th([&] { qmm_run(isa, b); });
              qmm_run(isa, a);
              th.join();
            }, min_s);
          }
          result r{type_name(t), isa_name, s.name, s.k, s.n, m, 1e3 * sec, w.size() / sec / 1e9,
                   2.0 * macs / sec / 1e9, 1e3 * sec2};
          std::printf("%-5s %-9s %-9s %5d %6d %4d %10.4f %8.2f %8.2f %10.4f\n", r.type.c_str(), r.isa.c_str(),
                      r.shape.c_str(), r.k, r.n, r.m, r.ms, r.gbs, r.gops, r.ms2);
          std::fflush(stdout);
          out.push_back(r);
        }
      }
    }
  }
  if (json) {
    FILE* fp = std::fopen(json, "w");
    if (!fp) { std::perror(json); return 1; }
    std::fprintf(fp, "[\n");
    for (size_t i = 0; i < out.size(); ++i) {
      const result& r = out[i];
      std::fprintf(fp, "  {\"type\":\"%s\",\"isa\":\"%s\",\"shape\":\"%s\",\"k\":%d,\"n\":%d,\"m\":%d,\"ms\":%.6f,"
                   "\"weight_gbs\":%.3f,\"gops\":%.3f,\"ms_2threads\":%.6f}%s\n", r.type.c_str(), r.isa.c_str(),
                   r.shape.c_str(), r.k, r.n, r.m, r.ms, r.gbs, r.gops, r.ms2, i + 1 < out.size() ? "," : "");
    }
    std::fprintf(fp, "]\n");
    std::fclose(fp);
  }
  return 0;
}
