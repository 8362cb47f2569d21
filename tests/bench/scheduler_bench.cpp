// Google Benchmark: the cost of one scheduler cycle (schedule + update) with 256 running
// sequences and a deep waiting queue, at steady state. Not a test: it prints timings.
//
// Shape: max_num_seqs 256, all slots busy decoding (prompt 512, outputs 64..256 so a few finish
// every step); each finished job is replaced by a new submit, so the queue stays 10k deep and
// every cycle also admits and prefills the freed slots' replacements. The timed body is what the
// scheduler actor does per step, minus the executor: schedule(), a fake step_result, update(),
// plus the resubmits.
#include <benchmark/benchmark.h>

#include <random>

#include "engine/scheduler.hpp"

namespace {

using namespace conveyor;

struct churn {
  scheduler sched;
  std::mt19937_64 rng{42};
  seq_id next_id = 0;
  double now = 0.0;

  explicit churn(bool prefix_caching) : sched(make_sched(), make_cache(prefix_caching), 20000) {
    for (int i = 0; i < 256 + 10000; ++i) submit();
    for (int i = 0; i < 2000; ++i) cycle(); // reach the steady mix of decodes and prefills
  }

  static scheduler_config make_sched() {
    scheduler_config c;
    c.max_num_seqs = 256;
    c.max_num_batched_tokens = 8192;
    c.max_model_len = 1024;
    return c;
  }
  static cache_config make_cache(bool prefix_caching) {
    cache_config c;
    c.enable_prefix_caching = prefix_caching;
    return c;
  }

  void submit() {
    request r;
    r.id = next_id++;
    r.prompt_token_ids.resize(512);
    for (token_id& t : r.prompt_token_ids) t = static_cast<token_id>(rng() % 50000);
    r.stop.max_tokens = 64 + static_cast<int32_t>(rng() % 193);
    r.stop.ignore_eos = true;
    r.arrival_time_s = now;
    sched.submit(std::move(r), now);
  }

  // One scheduler cycle; returns the number of sequences in the plan.
  size_t cycle() {
    const step_plan plan = sched.schedule(now);
    step_result result;
    result.step_id = plan.step_id;
    result.sampled.reserve(plan.seqs.size());
    for (const scheduled_seq& s : plan.seqs)
      if (s.sample) result.sampled.push_back({s.id, 1, 0.0f, {}});
    now += 0.01;
    size_t finished = 0;
    if (!plan.seqs.empty())
      for (const seq_event& e : sched.update(result, now))
        finished += e.kind == event_kind::finished ? 1 : 0;
    for (size_t i = 0; i < finished; ++i) submit();
    return plan.seqs.size();
  }
};

void BM_schedule_update_256_running(benchmark::State& state) {
  churn c(state.range(0) != 0);
  size_t seqs = 0;
  for (auto _ : state) seqs += c.cycle();
  const scheduler_stats st = c.sched.stats();
  state.counters["seqs_per_step"] = static_cast<double>(seqs) / state.iterations();
  state.counters["running"] = st.num_running;
  state.counters["waiting"] = st.num_waiting;
}
BENCHMARK(BM_schedule_update_256_running)
    ->ArgName("prefix_caching")
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
