// `conveyor step-bench`: the CPU executor's raw step throughput. For each batch size B it
// fills B sequences with a --context-token prompt, then times decode steps of B tokens (one
// per sequence); it also times one --prompt-len prefill and, with --drafts, one sequence's
// speculative verification steps (1 + K rows). Prints tables; --json FILE writes them.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model/model_path.hpp"
#include "tools/command.hpp"
#include "tools/commands.hpp"
#include "tools/step_timing.hpp"

namespace conveyor::tools {
namespace {

struct step_bench_opts {
  std::string model = "smollm2";
  std::vector<int32_t> batches{1, 8, 32, 128};
  std::vector<int32_t> drafts;
  int32_t context = 128, steps = 16, prompt_len = 512;
  std::string json_path;
  int32_t threads = 0;
  std::string cpu_math = "fast";
};

// One sequence at `context` verifying k drafts per step (k + 1 sampled rows): the median step of
// `steps`, each k in turn so that a slow moment of the host hits every k alike.
void time_drafts(model::cpu_executor& ex, const step_bench_opts& o, int32_t per_seq, nlohmann::json& out) {
  const int32_t vocab = ex.info().vocab_size;
  time_step_ms(ex, make_bench_plan(1, 0, o.context, per_seq, vocab));  // fill the context
  std::vector<std::vector<double>> ms(o.drafts.size());
  for (int32_t s = 0; s < o.steps; ++s)
    for (size_t i = 0; i < o.drafts.size(); ++i) {
      step_plan p = make_bench_plan(1, o.context, o.drafts[i] + 1, per_seq, vocab);
      p.seqs[0].num_drafts = o.drafts[i];
      ms[i].push_back(time_step_ms(ex, p));
    }
  std::printf("\n%8s %14s %18s\n", "drafts", "step ms", "ms per row");
  for (size_t i = 0; i < o.drafts.size(); ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    const double med = ms[i][ms[i].size() / 2];
    std::printf("%8d %14.2f %18.2f\n", o.drafts[i], med, med / (o.drafts[i] + 1));
    out["verify"].push_back({{"drafts", o.drafts[i]}, {"step_ms", med}});
  }
}

int run_step_bench(const step_bench_opts& o) {
  auto file = model::open_model(model::resolve_model(o.model));
  int32_t max_b = 1;
  for (int32_t b : o.batches) max_b = std::max(max_b, b);
  int32_t max_drafts = 0;
  for (int32_t k : o.drafts) max_drafts = std::max(max_drafts, k);
  model::cpu_executor_options eo;
  const int32_t per_seq = (std::max(o.context + std::max(o.steps, max_drafts + 1), o.prompt_len) + eo.block_size - 1) / eo.block_size;
  eo.num_kv_blocks = per_seq * max_b;
  eo.threads = o.threads;
  eo.math = model::parse_cpu_math(o.cpu_math);
  model::cpu_executor ex(file, eo);
  std::printf("%s: %s\n", ex.config().name.c_str(), ex.compute_summary().c_str());
  const int32_t vocab = ex.info().vocab_size;
  nlohmann::json out{{"model", ex.config().name}, {"context", o.context}, {"prompt_len", o.prompt_len},
                     {"compute", ex.compute_summary()}};

  time_step_ms(ex, make_bench_plan(1, 0, o.prompt_len, per_seq, vocab));  // warm-up
  const double prefill_ms = time_step_ms(ex, make_bench_plan(1, 0, o.prompt_len, per_seq, vocab));
  out["prefill"] = {{"tokens", o.prompt_len}, {"ms", prefill_ms}, {"tokens_per_s", 1000.0 * o.prompt_len / prefill_ms}};
  std::printf("prefill: %d tokens in %.1f ms = %.1f tokens/s\n\n", o.prompt_len, prefill_ms, 1000.0 * o.prompt_len / prefill_ms);
  std::printf("%8s %14s %18s\n", "batch", "step ms", "decode tokens/s");
  for (int32_t b : o.batches) {
    time_step_ms(ex, make_bench_plan(b, 0, o.context, per_seq, vocab));  // fill the context of every sequence
    double total = 0;
    for (int32_t s = 0; s < o.steps; ++s) total += time_step_ms(ex, make_bench_plan(b, o.context + s, 1, per_seq, vocab));
    const double step_ms = total / o.steps;
    std::printf("%8d %14.2f %18.1f\n", b, step_ms, 1000.0 * b / step_ms);
    out["decode"].push_back({{"batch", b}, {"step_ms", step_ms}, {"tokens_per_s", 1000.0 * b / step_ms}});
  }
  if (!o.drafts.empty()) time_drafts(ex, o, per_seq, out);
  if (!o.json_path.empty() && !write_output("step-bench", error_sink::plain, "--json", o.json_path, out.dump(1) + "\n"))
    return 2;
  return 0;
}

} // namespace

void register_step_bench(CLI::App& app, int& exit_code) {
  auto [cmd, o] = add_command<step_bench_opts>(
      app, exit_code, "step-bench", "Time the CPU executor's prefill and decode steps at several batch sizes",
      [](const step_bench_opts& opts) { return run_failing_with("step-bench", 2, [&] { return run_step_bench(opts); }); });
  cmd->add_option("--model,-m", o->model, "Model name, GGUF file or Hugging Face folder")->capture_default_str();
  cmd->add_option("--batches", o->batches, "Decode tokens per step to time")->delimiter(',')->capture_default_str();
  cmd->add_option("--drafts", o->drafts, "Also time one sequence verifying this many drafts per step (median step)")
      ->delimiter(',')->check(CLI::Range(0, 64));
  cmd->add_option("--context", o->context, "Tokens already in each sequence's KV cache")->capture_default_str();
  cmd->add_option("--steps", o->steps, "Decode steps timed per batch size")->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Tokens in the timed prefill")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Compute threads (0: every core)")->check(CLI::Range(0, 1024))->capture_default_str();
  cmd->add_option("--cpu-math", o->cpu_math, "fast (8-bit activations, integer dot products) | exact (f32)")
      ->check(CLI::IsMember({"fast", "exact"}))->capture_default_str();
  cmd->add_option("--json", o->json_path, "Also write the results to this JSON file");
}

} // namespace conveyor::tools
