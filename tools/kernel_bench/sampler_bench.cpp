// sampler-bench: the per-row work after the LM head (model/cpu/sampler.cpp) and SwiGLU
// (model/cpu/cpu_ops.cpp), single thread, on SmolLM2-sized rows: 49152 logits drawn N(0, 3) (a
// flat distribution: a seeded draw walks deep into it, a worst case) and a 1536-wide SwiGLU row.
//   sampler-bench [--vocab 49152] [--json FILE]
// Timing: the best of repeated calls (at least 5 and 0.2 s). Then the answers of fixed calls (the
// greedy token, the top 20's ids, 100 seeded draws at positions 0..99) are summed and printed, so
// two builds can be compared for the same tokens.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/sampler.hpp"
#include "tools/kernel_bench/bench_common.hpp"

using namespace conveyor;
using namespace conveyor::model;

int main(int argc, char** argv) {
  int vocab = 49152;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vocab" && i + 1 < argc) vocab = std::max(8, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: sampler-bench [--vocab 49152] [--json FILE]\n");
      return 2;
    }
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(vocab)), gate(2 * 1536), out(1536);
  for (float& x : logits) x = d(rng);
  for (float& x : gate) x = d(rng);
  sampler_scratch scratch;
  std::vector<token_logprob> top;
  sampling_params greedy, seeded;
  greedy.temperature = 0.0f;
  greedy.logprobs = false;
  seeded.temperature = 0.8f;
  seeded.logprobs = false;
  seeded.seed = 5;
  int64_t position = 0;
  double check = 0;
  struct row { const char* name; std::function<void()> f; double us; };
  std::vector<row> rows = {
      {"silu_mul, 1536 wide", [&] { silu_mul(gate.data(), gate.data() + 1536, out.data(), 1536); check += out[7]; }, 0},
      {"logprob_of (log-sum-exp)", [&] { check += logprob_of(logits, 0); }, 0},
      {"top_logprobs, 20", [&] { top_logprobs(logits, 20, top, scratch); check += top[0].token; }, 0},
      {"greedy draw", [&] { check += sample_token(logits, greedy, position++, scratch).token; }, 0},
      {"seeded draw, temperature 0.8", [&] { check += sample_token(logits, seeded, position++, scratch).token; }, 0},
  };
  std::printf("%-30s %10s   (vocab %d)\n", "work per row", "us", vocab);
  for (row& r : rows) {
    r.us = 1e6 * kernel_bench::best_s(r.f);
    std::printf("%-30s %10.1f\n", r.name, r.us);
  }
  int64_t answers = sample_token(logits, greedy, 0, scratch).token;
  top_logprobs(logits, 20, top, scratch);
  for (const token_logprob& t : top) answers += t.token;
  for (int64_t pos = 0; pos < 100; ++pos) answers += sample_token(logits, seeded, pos, scratch).token;
  std::printf("answers %lld (timing checksum %.3f)\n", static_cast<long long>(answers), check);
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "sampler-bench: cannot write %s\n", json);
      return 1;
    }
    std::fprintf(f, "{\"vocab\": %d, \"rows\": [", vocab);
    for (size_t i = 0; i < rows.size(); ++i) std::fprintf(f, "%s{\"name\": \"%s\", \"us\": %.3f}", i ? ", " : "", rows[i].name, rows[i].us);
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
