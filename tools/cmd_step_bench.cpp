// `conveyor step-bench`: the CPU executor's raw step throughput. For each batch size B it
// fills B sequences with a --context-token prompt, then times decode steps of B tokens (one
// per sequence); it also times one --prompt-len prefill and, with --drafts, the speculative
// verification steps (1 + K rows) of --draft-seqs sequences. Prints tables; --json FILE writes them.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string_view>

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
  int32_t context = 128, steps = 16, prompt_len = 512, draft_seqs = 1, block_size = 16, against_drafts = 0;
  std::string json_path;
  int32_t threads = 0;
  std::string cpu_math = "fast";
  std::string against;
};

// --against: a second executor that differs in one setting, and the decode steps of both at each
// batch in turn (a step of each, each first every other time), so that the host's slow moments
// hit both alike: their medians, the geometric mean of the paired ratios and how often the first won.
// With --against-drafts K every sequence verifies K drafts a step (1 + K rows). `same` changes
// nothing: what two equal executors differ by on this host (their memory's placement alone has
// given up to 5%) is the floor below which a ratio means nothing.
bool apply_against(const std::string& spec, model::cpu_executor_options& eo) {
  if (spec == "same") return true;
  if (spec == "kv-head-items") {
    eo.attention_whole_runs = false;
    return true;
  }
  const auto number = [&](std::string_view prefix, int32_t& v, int32_t lo, int32_t hi) {
    const char* end = spec.data() + spec.size();
    const auto [at, err] = std::from_chars(spec.data() + prefix.size(), end, v);
    return err == std::errc() && at == end && v >= lo && v <= hi;
  };
  if (spec.starts_with("block-size=")) return number("block-size=", eo.block_size, 1, 256);
  if (spec.starts_with("split-keys=")) return number("split-keys=", eo.attention_split_keys, 0, 1 << 20);
  return false;
}

void time_against(const model::gguf_file& file, int32_t per_seq, const step_bench_opts& o, model::cpu_executor_options eo,
                  int32_t max_b, nlohmann::json& out) {
  model::cpu_executor ex(file, eo);  // both new, built one after the other
  apply_against(o.against, eo);
  const int32_t k = o.against_drafts;
  const int32_t per_seq2 = (std::max(o.context + o.steps + k, o.prompt_len) + eo.block_size - 1) / eo.block_size;
  eo.num_kv_blocks = per_seq2 * max_b;
  model::cpu_executor other(file, eo);
  const int32_t vocab = ex.info().vocab_size;
  std::printf("\nagainst %s: decode steps (%d drafts each) of both in turn\n%8s %12s %12s %12s %10s\n", o.against.c_str(), k,
              "batch", "ms", "against ms", "geo ratio", "faster");
  for (int32_t b : o.batches) {
    time_step_ms(ex, make_bench_plan(b, 0, o.context, per_seq, vocab));  // fill the contexts
    time_step_ms(other, make_bench_plan(b, 0, o.context, per_seq2, vocab));
    std::vector<double> a, z;
    double log_ratio = 0;
    int32_t wins = 0;
    for (int32_t s = 0; s < o.steps; ++s) {
      const auto plan = [&](int32_t blocks) {
        step_plan p = make_bench_plan(b, o.context + s, 1 + k, blocks, vocab);
        for (auto& q : p.seqs) q.num_drafts = k;
        return p;
      };
      const auto one = [&] { a.push_back(time_step_ms(ex, plan(per_seq))); };
      const auto two = [&] { z.push_back(time_step_ms(other, plan(per_seq2))); };
      if (s % 2 == 0) one(), two();  // each goes first every other step
      else two(), one();
      log_ratio += std::log(a.back() / z.back());
      wins += a.back() < z.back() ? 1 : 0;
    }
    std::sort(a.begin(), a.end());
    std::sort(z.begin(), z.end());
    const double ratio = std::exp(log_ratio / o.steps);
    std::printf("%8d %12.2f %12.2f %12.3f %6d/%-3d\n", b, a[a.size() / 2], z[z.size() / 2], ratio, wins, o.steps);
    out["against"].push_back({{"setting", o.against}, {"batch", b}, {"drafts", k}, {"step_ms", a[a.size() / 2]},
                              {"against_step_ms", z[z.size() / 2]}, {"geo_ratio", ratio}, {"faster", wins}, {"steps", o.steps}});
  }
}

// --draft-seqs sequences at `context`, each verifying k drafts per step (k + 1 sampled rows): the
// median step of `steps`, each k in turn so that a slow moment of the host hits every k alike.
// The last column is what a drafted row adds to the step of the sequences' decodes alone (k = 0,
// timed in the same turns).
void time_drafts(model::cpu_executor& ex, const step_bench_opts& o, int32_t per_seq, nlohmann::json& out) {
  const int32_t vocab = ex.info().vocab_size, n = o.draft_seqs;
  time_step_ms(ex, make_bench_plan(n, 0, o.context, per_seq, vocab));  // fill the context
  std::vector<int32_t> ks{0};
  for (int32_t k : o.drafts)
    if (k > 0) ks.push_back(k);
  std::vector<std::vector<double>> ms(ks.size());
  for (int32_t s = 0; s < o.steps; ++s)
    for (size_t i = 0; i < ks.size(); ++i) {
      step_plan p = make_bench_plan(n, o.context, ks[i] + 1, per_seq, vocab);
      for (auto& q : p.seqs) q.num_drafts = ks[i];
      ms[i].push_back(time_step_ms(ex, p));
    }
  std::printf("\n%d sequence(s) verifying k drafts each\n%8s %14s %14s %18s\n", n, "drafts", "step ms", "ms per row",
              "ms per draft row");
  double base = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    const double med = ms[i][ms[i].size() / 2];
    if (i == 0) base = med;
    const double per_draft = ks[i] > 0 ? (med - base) / (n * ks[i]) : 0.0;
    std::printf("%8d %14.2f %14.2f %18.2f\n", ks[i], med, med / (n * (ks[i] + 1)), per_draft);
    out["verify"].push_back({{"seqs", n}, {"drafts", ks[i]}, {"step_ms", med}});
  }
}

int run_step_bench(const step_bench_opts& o) {
  auto file = model::open_model(model::resolve_model(o.model));
  int32_t max_b = o.drafts.empty() ? 1 : o.draft_seqs;
  for (int32_t b : o.batches) max_b = std::max(max_b, b);
  int32_t max_drafts = 0;
  for (int32_t k : o.drafts) max_drafts = std::max(max_drafts, k);
  model::cpu_executor_options eo;
  eo.block_size = o.block_size;
  const int32_t per_seq =
      (std::max(o.context + std::max(o.steps, max_drafts + 1) + o.against_drafts, o.prompt_len) + eo.block_size - 1) / eo.block_size;
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
  if (!o.against.empty()) time_against(file, per_seq, o, eo, max_b, out);
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
  cmd->add_option("--drafts", o->drafts, "Also time --draft-seqs sequences verifying this many drafts each per step (median step)")
      ->delimiter(',')->check(CLI::Range(0, 64));
  cmd->add_option("--draft-seqs", o->draft_seqs, "Sequences verifying --drafts at once (each its own context)")
      ->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--context", o->context, "Tokens already in each sequence's KV cache")->capture_default_str();
  cmd->add_option("--steps", o->steps, "Decode steps timed per batch size")->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Tokens in the timed prefill")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "Positions per KV block (as serve's --block-size)")
      ->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--threads", o->threads, "Compute threads (0: every core)")->check(CLI::Range(0, 1024))->capture_default_str();
  cmd->add_option("--cpu-math", o->cpu_math, "fast (8-bit activations, integer dot products) | exact (f32)")
      ->check(CLI::IsMember({"fast", "exact"}))->capture_default_str();
  cmd->add_option("--against", o->against,
                  "Also time the decode steps against a second executor, in turn: kv-head-items (attention an item a kv "
                  "head), block-size=N, split-keys=N (a lone run's attention split from N positions; 0 never) or same "
                  "(the method's noise)")
      ->check([](const std::string& v) {
        model::cpu_executor_options eo;
        return apply_against(v, eo) ? std::string() : "expected kv-head-items, block-size=N (N in 1..256), split-keys=N (N in 0..1048576) or same";
      });
  cmd->add_option("--against-drafts", o->against_drafts, "--against: each sequence verifies this many drafts a step")
      ->check(CLI::Range(0, 64))->capture_default_str();
  cmd->add_option("--json", o->json_path, "Also write the results to this JSON file");
}

} // namespace conveyor::tools
