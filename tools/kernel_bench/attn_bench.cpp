// attn-bench: the CPU executor's attention (paged_kv::attend) on one thread, the work item shapes
// a step hands it: `rows` consecutive rows of one sequence (1: a decode; 1 + k: a speculative
// verification; more: a prompt chunk) times `heads` query heads of one kv head, over `ctx`
// cached positions, fp16 cache (the default) or f32.
//   attn-bench [--ctx 128,600,2048] [--rows 1,5,9] [--heads 1,3] [--hd 64] [--layers 30] [--bs 16] [--kv each|sweep] [--f32] [--json FILE]
// --layers L keeps L layers' caches and attends them in turn, so that a call finds its K and V
// where a step finds them (30 layers of SmolLM2 at context 600 hold ~14 MB, past L2), not in L1;
// 300 layers put them past L3, as a step that streams the weights between layers finds them.
// --bs: positions a KV block holds (the server's --block-size, 16 by default).
// --kv each|sweep: a call covers all three kv heads (each: one attend a kv head in turn; sweep:
// one attend_heads, a block's pieces of every head read together); default: kv head 1 alone.
// Timing: the best of repeated rounds over the layers (at least 5 and 0.2 s per cell), per call. Prints microseconds per call
// and the multiply-adds per second of its QK and PV products (2 * rows * heads * ctx * hd).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "model/cpu/paged_kv.hpp"
#include "tools/kernel_bench/bench_common.hpp"

namespace {

using conveyor::model::kv_storage;
using conveyor::model::paged_kv;
using conveyor::kernel_bench::now_s;
using conveyor::kernel_bench::parse_list;

struct cell {
  int ctx, rows, heads;
  double us, gmacs;
};

enum class kv_mode { one, each, sweep };

cell time_cell(int ctx, int rows, int heads, int hd, int layers, int bs, kv_storage st, kv_mode mode) {
  constexpr int n_kv = 3;  // SmolLM2's kv heads: a position's row holds all three, kv head 1 is attended
  const int positions = ctx + rows;
  const int blocks = (positions + bs - 1) / bs;
  paged_kv kv(layers, blocks, bs, n_kv, hd, st);
  std::vector<conveyor::block_id> table(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = blocks - 1 - b;  // not in order, as in a pool
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(n_kv * hd)), v(k.size());
  for (int l = 0; l < layers; ++l)
    for (int p = 0; p < positions; ++p) {
      for (size_t e = 0; e < k.size(); ++e) {
        k[e] = g(rng);
        v[e] = g(rng);
      }
      kv.store(l, table[static_cast<size_t>(p / bs)], p % bs, k.data(), v.data());
    }
  const int q_stride = (mode == kv_mode::one ? 1 : n_kv) * heads * hd;
  std::vector<float> q(static_cast<size_t>(rows * q_stride)), out(q.size());
  for (float& x : q) x = g(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  double best = 1e30;
  const double start = now_s();
  for (int it = 0; it < 5 || now_s() - start < 0.2; ++it) {
    const double t0 = now_s();
    for (int l = 0; l < layers; ++l) {
      if (mode == kv_mode::one) kv.attend(l, table.data(), ctx, rows, 1, heads, q.data(), q_stride, scale, out.data(), q_stride, true);
      if (mode == kv_mode::sweep) kv.attend_heads(l, table.data(), ctx, rows, 0, n_kv, heads, q.data(), q_stride, scale, out.data(), q_stride, true);
      if (mode == kv_mode::each)
        for (int h = 0; h < n_kv; ++h)
          kv.attend(l, table.data(), ctx, rows, h, heads, q.data() + h * heads * hd, q_stride, scale, out.data() + h * heads * hd, q_stride, true);
    }
    best = std::min(best, (now_s() - t0) / layers);
  }
  const double macs = 2.0 * rows * heads * (mode == kv_mode::one ? 1 : n_kv) * (ctx + (rows + 1) / 2.0) * hd;
  return {ctx, rows, heads, best * 1e6, macs / best / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ctxs = {128, 600, 2048}, rows = {1, 5, 9}, heads = {1, 3};
  int hd = 64, layers = 1, bs = 16;
  kv_storage st = kv_storage::f16;
  kv_mode mode = kv_mode::one;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ctx" && i + 1 < argc) ctxs = parse_list(argv[++i]);
    else if (a == "--rows" && i + 1 < argc) rows = parse_list(argv[++i]);
    else if (a == "--heads" && i + 1 < argc) heads = parse_list(argv[++i]);
    else if (a == "--hd" && i + 1 < argc) hd = std::max(1, std::atoi(argv[++i]));
    else if (a == "--layers" && i + 1 < argc) layers = std::max(1, std::atoi(argv[++i]));
    else if (a == "--bs" && i + 1 < argc) bs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--kv" && i + 1 < argc && (std::string(argv[i + 1]) == "each" || std::string(argv[i + 1]) == "sweep"))
      mode = std::string(argv[++i]) == "each" ? kv_mode::each : kv_mode::sweep;
    else if (a == "--f32") st = kv_storage::f32;
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: attn-bench [--ctx 128,600,2048] [--rows 1,5,9] [--heads 1,3] [--hd 64] [--layers 1] [--bs 16] [--kv each|sweep] [--f32] [--json FILE]\n");
      return 2;
    }
  }
  std::vector<cell> cells;
  std::printf("%8s %6s %6s %12s %12s\n", "ctx", "rows", "heads", "us/call", "GMAC/s");
  for (int c : ctxs)
    for (int r : rows)
      for (int h : heads) {
        cells.push_back(time_cell(c, r, h, hd, layers, bs, st, mode));
        const cell& x = cells.back();
        std::printf("%8d %6d %6d %12.2f %12.2f\n", x.ctx, x.rows, x.heads, x.us, x.gmacs);
        std::fflush(stdout);
      }
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "attn-bench: cannot write %s\n", json);
      return 1;
    }
    const char* kv = mode == kv_mode::one ? "one" : mode == kv_mode::each ? "each" : "sweep";
    std::fprintf(f, "{\"hd\": %d, \"layers\": %d, \"block_size\": %d, \"storage\": \"%s\", \"kv\": \"%s\", \"cells\": [", hd, layers, bs,
                 st == kv_storage::f16 ? "f16" : "f32", kv);
    for (size_t i = 0; i < cells.size(); ++i)
      std::fprintf(f, "%s{\"ctx\": %d, \"rows\": %d, \"heads\": %d, \"us\": %.3f, \"gmac_s\": %.3f}", i ? ", " : "", cells[i].ctx,
                   cells[i].rows, cells[i].heads, cells[i].us, cells[i].gmacs);
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
