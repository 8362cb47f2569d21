// Google Benchmark: the cost of prompt lookup (engine/speculation.hpp's propose_ngram) per
// drafting step, on the scheduler's thread, as a sequence's context grows: the n-gram index
// (engine/ngram_index.hpp, extended by the step's new token) against the scan the proposer did
// before it (every n from prompt_lookup_max down to the first with an earlier occurrence, every
// earlier position compared; the occurrence search only, its dominant cost). Not a test: it
// prints timings.
//
// Shape: grounded-like text over a 32k vocabulary (random tokens, a quarter of the steps
// starting to copy a run of 1-8 tokens from earlier), prompt_lookup 1..5, 8 drafts; the timed body is one
// step: append a token, look up.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "engine/ngram_index.hpp"
#include "engine/speculation.hpp"

namespace {

using namespace conveyor;

struct text {
  std::mt19937_64 rng{7};
  std::vector<token_id> t;
  size_t from = 0, run = 0;  // copying t[from ..] for `run` more tokens
  void grow() {
    if (run == 0 && t.size() > 16 && rng() % 4 == 0) {
      from = rng() % (t.size() - 8);
      run = 1 + rng() % 8;
    }
    if (run > 0) {
      t.push_back(t[from++]);
      --run;
    } else {
      t.push_back(static_cast<token_id>(rng() % 32000));
    }
  }
};

// The earlier occurrences of the longest suffix of 1..5 tokens that has any, by scanning.
size_t scan(const std::vector<token_id>& t, std::vector<int64_t>& alive) {
  const auto len = static_cast<int64_t>(t.size());
  for (int64_t n = std::min<int64_t>(5, len - 1); n >= 1; --n) {
    alive.clear();
    for (int64_t i = len - n - 1; i >= 0; --i)
      if (std::equal(t.end() - n, t.end(), t.begin() + i)) alive.push_back(i + n);
    if (!alive.empty()) return alive.size();
  }
  return 0;
}

void BM_prompt_lookup(benchmark::State& state) {
  const bool indexed = state.range(0) != 0;
  text x;
  while (x.t.size() < static_cast<size_t>(state.range(1))) x.grow();
  ngram_index index;
  std::vector<token_id> out;
  std::vector<int64_t> alive;
  if (indexed) propose_ngram(index, x.t, 1, 5, 8, out);  // the index of the prompt, built once
  for (auto _ : state) {
    x.grow();
    benchmark::DoNotOptimize(indexed ? static_cast<size_t>(propose_ngram(index, x.t, 1, 5, 8, out)) : scan(x.t, alive));
  }
}
BENCHMARK(BM_prompt_lookup)
    ->ArgNames({"indexed", "context"})
    ->ArgsProduct({{0, 1}, {1024, 8192, 32768}})
    ->Iterations(2000)
    ->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
