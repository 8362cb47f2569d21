// qmm_k_bench: K-quant qmm (Q4_K, Q5_K, Q6_K x Q8_K) throughput per type x ISA x tokens m on
// SmolLM2-135M and Llama-3-8B projection shapes, single thread plus a 2-thread row split for
// m = 1 and m = 128. Weight GB/s = weight bytes / time (weights cycle through copies larger than
// L3, so m = 1 streams from DRAM as in decode); GOP/s = 2 m n k / time.
//   qmm_k_bench [--json FILE] [--full] [--min-ms N] [--m 1,2,8] [--isa avx2,avx512] [--type q4_k]
//               [--shape llama] [--hot] [--cpu-time]
// --full also runs the scalar kernel for m > 8 (slow). --m / --isa / --type / --shape keep only
// the listed step sizes, ISAs, types and shapes whose name contains the text. Small steps
// (m <= 4) and m = 128 also run with 2 threads. SmolLM2's k = 576 shapes cannot hold
// K-quant rows (576 % 256 != 0; llama-quantize falls back to Q5_0/Q5_1/Q8_0 there) and are
// listed as skipped.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/cpu/qmm.hpp"
#include "model/formats/dequant.hpp"

using namespace conveyor::model;

namespace {

struct shape {
  const char* name;
  int32_t n_rows, k;
};
const shape kShapes[] = {{"smollm2 qkv/o 960x576", 960, 576}, {"smollm2 up 3072x576", 3072, 576},
                         {"smollm2 down 576x1536", 576, 1536}, {"llama3 q/o 4096x4096", 4096, 4096},
                         {"llama3 up 14336x4096", 14336, 4096}, {"llama3 down 4096x14336", 4096, 14336},
                         {"l2-resident 256x4096", 256, 4096}};  // compute-bound check: only with --shape l2

struct result {
  std::string type, isa, shape;
  int32_t m, threads;
  double ms, gbs, gops;
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// This thread's CPU time (ms): on a shared machine, 1-thread rows timed with --cpu-time leave
/// out the time other processes held the core.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/// Random blocks with fp16 scales in [1e-3, 1e-2] (no inf/NaN).
std::vector<uint8_t> random_weights(ggml_type t, size_t blocks, std::mt19937& rng) {
  const size_t bb = block_bytes(t);
  std::vector<uint8_t> w(blocks * bb);
  for (size_t i = 0; i < w.size(); i += 4) {
    const uint32_t v = rng();
    std::memcpy(&w[i], &v, std::min<size_t>(4, w.size() - i));
  }
  std::uniform_real_distribution<float> sd(1e-3f, 1e-2f);
  for (size_t b = 0; b < blocks; ++b) {
    const uint16_t d = fp32_to_fp16(sd(rng)), dm = fp32_to_fp16(sd(rng));
    std::memcpy(&w[b * bb + (t == ggml_type::q6_k ? 208 : 0)], &d, 2);
    if (t != ggml_type::q6_k) std::memcpy(&w[b * bb + 2], &dm, 2);
  }
  return w;
}

/// One row split between the caller and a helper thread.
struct pair_pool {
  std::atomic<int> gen{0}, done{0};
  std::atomic<bool> quit{false};
  qmm_job job;
  cpu_isa isa = cpu_isa::scalar;
  std::thread th;
  pair_pool() {
    th = std::thread([this] {
      for (int seen = 0;; ++seen) {
        gen.wait(seen);  // sleeps (futex), so single-thread rows keep the other core
        if (quit.load()) return;
        qmm_run(isa, job);
        done.fetch_add(1);
        done.notify_one();
      }
    });
  }
  ~pair_pool() {
    quit = true;
    gen.fetch_add(1);
    gen.notify_one();
    th.join();
  }
  void run(cpu_isa i, qmm_job j) {
    const int32_t half = j.n_rows / 2;
    job = j;
    job.w += static_cast<size_t>(half) * j.w_row_bytes;
    job.c += half;
    job.n_rows = j.n_rows - half;
    isa = i;
    const int before = done.load();
    gen.fetch_add(1);
    gen.notify_one();
    j.n_rows = half;
    qmm_run(i, j);
    done.wait(before);
  }
};

} // namespace

int main(int argc, char** argv) {
  std::string json;
  bool full = false, hot = false, cpu_time = false;  // --hot: one copy of the weights (cache-resident when it fits)
  double min_ms = 300;
  std::string ms_list = "1,2,3,4,8,32,128,512", isa_list = "scalar,avx2,avx512", type_list = "q4_k,q5_k,q6_k", shape_sel;
  // ",a,b," contains ",x,": the list filters.
  const auto listed = [](std::string list, std::string x) {
    for (std::string* v : {&list, &x})
      for (char& ch : *v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return ("," + list + ",").find("," + x + ",") != std::string::npos;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--full") full = true;
    else if (a == "--hot") hot = true;
    else if (a == "--cpu-time") cpu_time = true;
    else if (a == "--min-ms" && i + 1 < argc) min_ms = std::stod(argv[++i]);
    else if (a == "--m" && i + 1 < argc) ms_list = argv[++i];
    else if (a == "--isa" && i + 1 < argc) isa_list = argv[++i];
    else if (a == "--type" && i + 1 < argc) type_list = argv[++i];
    else if (a == "--shape" && i + 1 < argc) shape_sel = argv[++i];
    else {
      std::fprintf(stderr, "usage: qmm_k_bench [--json FILE] [--full] [--min-ms N] [--m LIST] [--isa LIST] [--type LIST] [--shape TEXT] [--hot] [--cpu-time]\n");
      return 2;
    }
  }
  std::mt19937 rng(42);
  std::vector<result> results;
  pair_pool pool;
  std::printf("%-6s %-7s %-24s %5s %3s %10s %9s %9s\n", "type", "isa", "shape", "m", "thr", "ms", "wGB/s", "GOP/s");
  for (const shape& s : kShapes) {
    if (std::string(s.name).find(shape_sel) == std::string::npos) continue;
    if (shape_sel.empty() && std::string(s.name).rfind("l2", 0) == 0) continue;
    if (s.k % 256 != 0) {
      std::printf("%-24s skipped: k = %d is not a multiple of 256 (no K-quant rows)\n", s.name, s.k);
      continue;
    }
    for (ggml_type t : {ggml_type::q4_k, ggml_type::q5_k, ggml_type::q6_k}) {
      if (!listed(type_list, type_name(t))) continue;
      const size_t row_bytes = block_bytes(t) * static_cast<size_t>(s.k / 256);
      const size_t mat_bytes = row_bytes * s.n_rows;
      const size_t copies = hot ? 1 : std::max<size_t>(1, (96u << 20) / mat_bytes + 1);
      std::vector<std::vector<uint8_t>> ws;
      for (size_t i = 0; i < copies; ++i) ws.push_back(random_weights(t, mat_bytes / block_bytes(t), rng));
      std::vector<float> x(static_cast<size_t>(512) * s.k);
      std::normal_distribution<float> nd;
      for (float& v : x) v = nd(rng);
      const size_t arb = act_row_bytes(act_format::q8_k, s.k);
      std::vector<uint8_t> act(arb * 512);
      for (int32_t r = 0; r < 512; ++r) quantize_act_row(cpu_isa::scalar, act_format::q8_k, &x[s.k * r], &act[arb * r], s.k);
      std::vector<float> c(static_cast<size_t>(512) * s.n_rows);
      for (cpu_isa isa : {cpu_isa::scalar, cpu_isa::avx2, cpu_isa::avx512}) {
        if (!cpu_isa_available(isa) || !listed(isa_list, cpu_isa_name(isa))) continue;
        for (int32_t m : {1, 2, 3, 4, 8, 16, 24, 32, 128, 512})
          for (int32_t thr : {1, 2}) {
            if (!listed(ms_list, std::to_string(m))) continue;
            if ((thr == 2 && m > 4 && m != 128) || (isa == cpu_isa::scalar && m > 8 && !full)) continue;
            qmm_job j;
            j.type = t;
            j.w_row_bytes = row_bytes;
            j.n_rows = s.n_rows;
            j.k = s.k;
            j.act = act.data();
            j.act_stride = arb;
            j.m = m;
            j.c = c.data();
            j.ldc = s.n_rows;
            int reps = 0;
            const bool cpu = cpu_time && thr == 1;
            const double t0 = cpu ? cpu_ms() : now_ms();
            double t1 = t0;
            while (reps < 2 || t1 - t0 < min_ms) {
              j.w = ws[reps % copies].data();
              if (thr == 1) qmm_run(isa, j);
              else pool.run(isa, j);
              ++reps;
              t1 = cpu ? cpu_ms() : now_ms();
            }
            const double ms = (t1 - t0) / reps;
            const result r{type_name(t), cpu_isa_name(isa), s.name, m, thr, ms, mat_bytes / ms / 1e6,
                           2.0 * m * s.n_rows * s.k / ms / 1e6};
            std::printf("%-6s %-7s %-24s %5d %3d %10.3f %9.2f %9.1f\n", r.type.c_str(), r.isa.c_str(), r.shape.c_str(), m,
                        thr, r.ms, r.gbs, r.gops);
            std::fflush(stdout);
            results.push_back(r);
          }
      }
    }
  }
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) {
      std::perror(json.c_str());
      return 1;
    }
    std::fprintf(f, "[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const result& r = results[i];
      std::fprintf(f,
                   "  {\"type\": \"%s\", \"isa\": \"%s\", \"shape\": \"%s\", \"m\": %d, \"threads\": %d, \"ms\": %.4f, "
                   "\"weight_gbs\": %.3f, \"gops\": %.2f}%s\n",
                   r.type.c_str(), r.isa.c_str(), r.shape.c_str(), r.m, r.threads, r.ms, r.gbs, r.gops,
                   i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "]\n");
    std::fclose(f);
  }
  return 0;
}
