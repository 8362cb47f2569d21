// Pure. A discrete-event simulation that drives the real scheduler with a fake executor: each
// step's duration comes from the cost model, the "model" emits token 1 for every sampled
// sequence, and requests ignore EOS so each produces exactly its output_len tokens. Simulated
// time starts at 0; nothing reads a clock.
//
//   loop: submit arrivals <= now -> plan = schedule(now) -> now += cost(plan)
//         -> update(result, now) -> record first tokens / finishes / KV utilisation
//   an empty plan jumps now to the next arrival.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config.hpp"
#include "engine/request.hpp"
#include "engine/sim/cost_model.hpp"
#include "engine/sim/workload.hpp"

namespace conveyor::sim {

struct sim_config {
  scheduler_config sched;
  cache_config cache;
  /// KV blocks in the simulated pool. >= 1 and enough for max_model_len.
  int32_t num_kv_blocks = 4096;
  cost_model cost;

  /// Returns "" when valid, else the first problem (engine config, then cost model).
  std::string validate() const;
};

/// What happened to one request.
struct request_record {
  double arrival_s = 0.0;
  /// When its first output token was produced; < 0 if never.
  double first_token_s = -1.0;
  double finish_s = -1.0;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  bool rejected = false;
  finish_reason reason = finish_reason::length;
};

struct sim_result {
  std::vector<request_record> requests;
  int64_t num_steps = 0;
  int64_t num_batched_tokens = 0;
  int64_t num_preemptions = 0;
  /// Time-weighted mean over steps of live KV tokens / allocated KV slots.
  double kv_utilization = 0.0;
  /// Time-weighted mean of running sequences per step.
  double mean_running = 0.0;
  /// Time of the last finish (simulated seconds since t = 0).
  double end_s = 0.0;
};

/// Runs `requests` (sorted by arrival) to completion. `cfg` must validate.
sim_result run_simulation(const sim_config& cfg, const std::vector<sim_request>& requests);

} // namespace conveyor::sim
