// `conveyor sim`: drives the real scheduler through a discrete-event simulation with a fake
// executor whose step time follows a cost model (engine/sim). Prints a table, or one JSON
// object with --json. Compare batching modes on the same workload with --batching.
#include <CLI/CLI.hpp>

#include <optional>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "engine/sim/metrics.hpp"
#include "engine/sim/simulator.hpp"
#include "engine/sim/workload.hpp"
#include "tools/command.hpp"
#include "tools/commands.hpp"

namespace conveyor::tools {
namespace {

struct sim_opts {
  std::string workload = "anyscale";
  std::string batching = "continuous";
  std::string policy = "fcfs";
  sim::workload_params wl;
  sim::sim_config cfg;
  bool json = false;
  bool no_prefix_caching = false;
  std::string cost_model = "cpu";
  std::optional<double> cost_fixed_ms, cost_per_token_ms, cost_per_context_token_us;

  sim_opts() {
    cfg.sched.max_num_seqs = 256;
    cfg.sched.max_num_batched_tokens = 8192;
    cfg.sched.max_model_len = 2048;
    cfg.num_kv_blocks = 4096;
  }
};

nlohmann::json to_json(const sim_opts& o, const sim::sim_metrics& m) {
  return {
      {"workload", o.workload},
      {"batching", o.batching},
      {"policy", o.policy},
      {"num_prompts", o.wl.num_prompts},
      {"input_len", o.wl.input_len},
      {"output_len", o.wl.output_len},
      {"cap", o.wl.cap},
      {"request_rate", std::isinf(o.wl.request_rate) ? nlohmann::json("inf")
                                                      : nlohmann::json(o.wl.request_rate)},
      {"seed", o.wl.seed},
      {"max_num_seqs", o.cfg.sched.max_num_seqs},
      {"max_num_batched_tokens", o.cfg.sched.max_num_batched_tokens},
      {"max_model_len", o.cfg.sched.max_model_len},
      {"num_kv_blocks", o.cfg.num_kv_blocks},
      {"block_size", o.cfg.cache.block_size},
      {"cost_model", o.cost_model},
      {"cost_fixed_ms", o.cfg.cost.fixed_ms},
      {"cost_per_token_ms", o.cfg.cost.per_token_ms},
      {"cost_per_context_token_us", o.cfg.cost.per_context_token_us},
      {"completed", m.completed},
      {"rejected", m.num_rejected},
      {"total_input_tokens", m.total_input_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"duration_s", m.duration_s},
      {"request_throughput", m.request_throughput},
      {"output_throughput", m.output_throughput},
      {"total_token_throughput", m.total_token_throughput},
      {"mean_ttft_ms", m.mean_ttft_ms},
      {"median_ttft_ms", m.median_ttft_ms},
      {"p99_ttft_ms", m.p99_ttft_ms},
      {"mean_tpot_ms", m.mean_tpot_ms},
      {"median_tpot_ms", m.median_tpot_ms},
      {"p99_tpot_ms", m.p99_tpot_ms},
      {"mean_e2el_ms", m.mean_e2el_ms},
      {"median_e2el_ms", m.median_e2el_ms},
      {"p99_e2el_ms", m.p99_e2el_ms},
      {"kv_utilization", m.kv_utilization},
      {"num_preemptions", m.num_preemptions},
      {"num_steps", m.num_steps},
      {"mean_tokens_per_step", m.mean_tokens_per_step},
      {"mean_running_seqs", m.mean_running},
  };
}

void print_table(const nlohmann::json& j) {
  std::printf("%-28s %s\n", "metric", "value");
  for (const auto& [key, value] : j.items()) {
    if (value.is_number_float())
      std::printf("%-28s %.3f\n", key.c_str(), value.get<double>());
    else
      std::printf("%-28s %s\n", key.c_str(), value.dump().c_str());
  }
}

int run_sim(sim_opts& o) {
  const auto kind = sim::parse_workload_kind(o.workload);
  const auto batching = parse_batching_mode(o.batching);
  const auto policy = parse_scheduling_policy(o.policy);
  if (!kind || !batching || !policy) {
    std::cerr << "conveyor sim: unknown --workload, --batching or --policy\n";
    return 2;
  }
  const auto cost = sim::cost_model_preset(o.cost_model);
  if (!cost) {
    std::cerr << "conveyor sim: unknown --cost-model '" << o.cost_model << "'; use one of " << sim::cost_model_preset_names() << "\n";
    return 2;
  }
  o.cfg.cost = *cost;
  if (o.cost_fixed_ms) o.cfg.cost.fixed_ms = *o.cost_fixed_ms;
  if (o.cost_per_token_ms) o.cfg.cost.per_token_ms = *o.cost_per_token_ms;
  if (o.cost_per_context_token_us) o.cfg.cost.per_context_token_us = *o.cost_per_context_token_us;
  o.wl.kind = *kind;
  o.cfg.sched.batching = *batching;
  o.cfg.sched.policy = *policy;
  o.cfg.cache.enable_prefix_caching = !o.no_prefix_caching;
  if (auto e = o.wl.validate(); !e.empty()) {
    std::cerr << "conveyor sim: " << e << "\n";
    return 2;
  }
  if (auto e = o.cfg.validate(); !e.empty()) {
    std::cerr << "conveyor sim: " << e << "\n";
    return 2;
  }
  const auto requests = sim::make_workload(o.wl);
  for (const auto& r : requests)
    if (static_cast<int32_t>(r.prompt.size()) + r.output_len > o.cfg.sched.max_model_len) {
      std::cerr << "conveyor sim: a request needs " << r.prompt.size() + r.output_len
                << " tokens but --max-model-len is " << o.cfg.sched.max_model_len
                << "; raise it (and --num-kv-blocks if needed)\n";
      return 2;
    }
  const auto metrics = sim::summarize(sim::run_simulation(o.cfg, requests));
  const auto j = to_json(o, metrics);
  if (o.json)
    std::cout << j.dump() << "\n";
  else
    print_table(j);
  return 0;
}

} // namespace

void register_sim(CLI::App& app, int& exit_code) {
  auto [cmd, o] = add_command<sim_opts>(
      app, exit_code, "sim", "Simulate the scheduler on a synthetic workload with a cost-model executor", run_sim);
  cmd->add_option("--workload", o->workload, "anyscale | fixed | uniform | poisson")
      ->capture_default_str();
  cmd->add_option("--num-prompts", o->wl.num_prompts, "Requests in the run")->capture_default_str();
  cmd->add_option("--input-len", o->wl.input_len, "Prompt tokens (centre for uniform/poisson)")
      ->capture_default_str();
  cmd->add_option("--output-len", o->wl.output_len,
                  "Output tokens (fixed/uniform) or the exponential's mean (anyscale/poisson)")
      ->capture_default_str();
  cmd->add_option("--cap", o->wl.cap, "Longest output of the capped exponential (32|128|512|1536)")
      ->capture_default_str();
  cmd->add_option("--range-ratio", o->wl.range_ratio, "Uniform lengths: half-width / centre")
      ->capture_default_str();
  cmd->add_option("--request-rate", o->wl.request_rate,
                  "Poisson arrivals per second (inf: all at t=0)")
      ->capture_default_str();
  cmd->add_option("--seed", o->wl.seed, "Workload seed")->capture_default_str();
  cmd->add_option("--batching", o->batching, "continuous | static")->capture_default_str();
  cmd->add_option("--policy", o->policy, "fcfs | priority")->capture_default_str();
  cmd->add_option("--max-num-seqs", o->cfg.sched.max_num_seqs, "Most sequences per step")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->cfg.sched.max_num_batched_tokens,
                  "Token budget per step")
      ->capture_default_str();
  cmd->add_option("--max-model-len", o->cfg.sched.max_model_len, "Longest prompt + output")
      ->capture_default_str();
  cmd->add_option("--num-kv-blocks", o->cfg.num_kv_blocks, "KV blocks in the pool")
      ->capture_default_str();
  cmd->add_option("--block-size", o->cfg.cache.block_size, "Tokens per KV block")
      ->capture_default_str();
  cmd->add_option("--kv-watermark", o->cfg.cache.kv_watermark,
                  "Fraction of blocks kept free at admission")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Disable the prefix cache");
  cmd->add_option("--cost-model", o->cost_model,
                  "Step cost parameters: cpu (fitted to the CPU executor) | h100-llama8b (roofline estimate); "
                  "see docs/benchmarks.md")
      ->capture_default_str();
  cmd->add_option("--cost-fixed-ms", o->cost_fixed_ms, "Cost model override: ms per step (cpu: 10.9)");
  cmd->add_option("--cost-per-token-ms", o->cost_per_token_ms, "Cost model override: ms per computed token (cpu: 1.76)");
  cmd->add_option("--cost-per-context-token-us", o->cost_per_context_token_us,
                  "Cost model override: us per attended context token (cpu: 1.87)");
  cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
}

} // namespace conveyor::tools
