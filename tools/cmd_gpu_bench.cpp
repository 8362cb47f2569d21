// `conveyor gpu-bench`: the CUDA executor's speed on random weights in Llama-3-8B's shape (bf16,
// speed does not depend on the weights' values). Measures the two ceilings first (device-to-device copy bandwidth, a large
// cuBLASLt GEMM), then decode step time at each --batches size against the memory-bandwidth
// floor (weight bytes + KV bytes read per step, over the measured copy bandwidth), and one
// --prompt-len prefill step in TFLOP/s against the GEMM ceiling. Prints a table; --json FILE.
// Then the Anyscale workload (--anyscale-prompts requests of 512 random tokens, outputs
// exponential with mean 128 capped at --anyscale-cap, all at t = 0) run offline through the
// engine's own scheduler, continuous and static batching; --workload-json writes its lengths
// for scripts/hf_gpu_baseline.py, which runs the same requests through Hugging Face transformers.
// Last, speculative decoding's verification steps on a batch-invariant executor (docs/gpu.md §3):
// at each --draft-batches size, a decode step and the same sequences each verifying k of --drafts
// drafted tokens, and r, what one drafted row costs next to the decode step (the CPU's is ~0.2).
// Without a CUDA device (or a build without CUDA) it says so and exits 2.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "engine/scheduler.hpp"
#include "engine/sim/workload.hpp"
#include "gpu/factory.hpp"
#include "model/formats/llama_config.hpp"
#include "tools/command.hpp"
#include "tools/commands.hpp"
#include "tools/step_timing.hpp"

namespace conveyor::tools {
namespace {

struct gpu_bench_opts {
  std::vector<int32_t> batches{1, 8, 64, 256};
  int32_t context = 1024, steps = 32, prompt_len = 2048, gemm_size = 8192;
  double gpu_memory_utilization = 0.90;
  int32_t anyscale_prompts = 1000, anyscale_cap = 512;
  std::vector<int32_t> draft_batches{1, 8, 64}, drafts{4, 8};
  bool no_verify = false;
  std::string json_path, workload_json;
};

model::llama_config llama3_8b() {
  model::llama_config c;
  c.name = "llama-3-8b-shape (random bf16 weights)";
  c.n_embd = 4096;
  c.n_layer = 32;
  c.n_head = 32;
  c.n_head_kv = 8;
  c.head_dim = 128;
  c.n_ff = 14336;
  c.vocab_size = 128256;
  c.n_ctx_train = 8192;
  c.n_rot = 128;
  c.rope_theta = 500000.0f;
  c.rms_eps = 1e-5f;
  return c;
}

using clock_type = std::chrono::steady_clock;

// Fills sequences 0 .. b - 1 with `context` cached tokens, in prefill steps that fit the token budget.
void fill_contexts(executor& ex, int32_t b, int32_t context, int32_t per_seq, int32_t max_tokens, int32_t vocab) {
  const int32_t seqs_per_fill = std::max(1, max_tokens / context);
  for (int32_t s0 = 0; s0 < b; s0 += seqs_per_fill) {
    step_plan p = make_bench_plan(std::min(seqs_per_fill, b - s0), 0, context, per_seq, vocab);
    for (auto& q : p.seqs) {
      q.id += static_cast<seq_id>(s0);
      for (auto& blk : q.block_table) blk += s0 * per_seq;
    }
    ex.step(p);
  }
}

// Mean milliseconds of `steps` steps of b sequences at `context`, each computing 1 + k tokens of
// which k are drafts (the same positions every step: the timing does not depend on the tokens).
double verify_ms(executor& ex, int32_t b, int32_t context, int32_t k, int32_t per_seq, int32_t steps, int32_t vocab) {
  step_plan p = make_bench_plan(b, context, 1 + k, per_seq, vocab);
  for (auto& q : p.seqs) q.num_drafts = k;
  ex.step(p);  // warm-up (cuBLASLt, shared-memory limits)
  double total = 0;
  for (int32_t i = 0; i < steps; ++i) total += time_step_ms(ex, p);
  return total / steps;
}

void bench_verification(const model::llama_config& c, const gpu_bench_opts& o, gpu::cuda_executor_options eo, nlohmann::json& out) {
  const int32_t max_b = *std::max_element(o.draft_batches.begin(), o.draft_batches.end());
  const int32_t max_k = *std::max_element(o.drafts.begin(), o.drafts.end());
  const int32_t bs = eo.block_size, per_seq = (o.context + 1 + max_k + bs - 1) / bs;
  eo.max_drafts = max_k;
  eo.max_num_seqs = max_b;
  eo.max_num_batched_tokens = std::max(eo.max_num_batched_tokens, max_b * (1 + max_k));
  eo.num_kv_blocks = per_seq * max_b;
  auto ex = gpu::make_cuda_executor_dummy(c, eo);
  std::printf("verification steps, batch-invariant executor (max_drafts %d)\n%-8s %-8s %-8s %-12s %-8s\n", max_k, "batch",
              "drafts", "rows", "step ms", "r");
  for (int32_t b : o.draft_batches) {
    fill_contexts(*ex, b, o.context, per_seq, eo.max_num_batched_tokens, c.vocab_size);
    const double t0 = verify_ms(*ex, b, o.context, 0, per_seq, o.steps, c.vocab_size);
    std::printf("%-8d %-8d %-8d %-12.3f %-8s\n", b, 0, b, t0, "-");
    out["verification"].push_back({{"batch", b}, {"drafts", 0}, {"step_ms", t0}});
    for (int32_t k : o.drafts) {
      const double tk = verify_ms(*ex, b, o.context, k, per_seq, o.steps, c.vocab_size), r = (tk - t0) / (k * t0);
      std::printf("%-8d %-8d %-8d %-12.3f %-8.3f\n", b, k, b * (1 + k), tk, r);
      out["verification"].push_back({{"batch", b}, {"drafts", k}, {"step_ms", tk}, {"r", r}});
    }
  }
}



struct workload_run {
  double seconds = 0;
  int64_t output_tokens = 0;
  int32_t steps = 0;
};

// The whole workload through engine::scheduler and the executor, as `conveyor serve` runs it
// minus the sockets: every request submitted at t = 0, greedy, EOS ignored.
workload_run run_workload(executor& ex, const std::vector<sim::sim_request>& reqs, batching_mode mode, int32_t max_seqs,
                          int32_t max_tokens) {
  scheduler_config sc;
  sc.max_num_seqs = max_seqs;
  sc.max_num_batched_tokens = max_tokens;
  sc.max_model_len = std::min(2048, ex.info().num_kv_blocks * ex.info().block_size);
  sc.batching = mode;
  cache_config cc;
  cc.block_size = ex.info().block_size;
  cc.enable_prefix_caching = false;
  if (auto err = validate_engine_config(sc, cc, ex.info().num_kv_blocks); !err.empty()) throw std::runtime_error(err);
  scheduler sched(sc, cc, ex.info().num_kv_blocks);
  for (size_t i = 0; i < reqs.size(); ++i) {
    request r;
    r.id = static_cast<seq_id>(i + 1);
    r.prompt_token_ids = reqs[i].prompt;
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = reqs[i].output_len;
    r.stop.ignore_eos = true;
    if (!sched.submit(std::move(r), 0.0).accepted) throw std::runtime_error("workload request rejected");
  }
  workload_run w;
  const auto t0 = clock_type::now();
  auto now = [&] { return std::chrono::duration<double>(clock_type::now() - t0).count(); };
  // The server's loop on a GPU (pipelined steps): step N+1 planned and submitted before N's
  // result is applied.
  int32_t outstanding = 0;
  while (sched.has_unfinished() || outstanding > 0) {
    const step_plan plan = sched.schedule(now());
    if (!plan.seqs.empty()) {
      ex.submit(plan);
      ++outstanding;
      ++w.steps;
    } else if (outstanding == 0) {
      throw std::runtime_error("scheduler stalled with unfinished requests");
    }
    if (outstanding == 2 || (outstanding == 1 && plan.seqs.empty())) {
      const step_result res = ex.collect();
      --outstanding;
      for (const seq_event& e : sched.update(res, now())) w.output_tokens += e.kind == event_kind::token ? 1 : 0;
    }
  }
  w.seconds = now();
  return w;
}

int run_gpu_bench(const gpu_bench_opts& o) {
  std::string why;
  if (!gpu::cuda_device_available(&why)) {
    std::cerr << "conveyor gpu-bench: no CUDA device: " << why << "\n";
    return 2;
  }
  const model::llama_config c = llama3_8b();
  const int32_t max_b = *std::max_element(o.batches.begin(), o.batches.end());
  const int32_t bs = 16, per_seq = (o.context + 2 * o.steps + 8 + bs - 1) / bs;
  const double d = c.n_embd, hd = c.head_dim, layer_params = d * (c.n_head + 2 * c.n_head_kv) * hd + d * c.n_head * hd + 3.0 * c.n_ff * d;
  const double weight_bytes = 2.0 * (layer_params * c.n_layer + double(c.vocab_size) * d);
  const double kv_bytes_per_pos = 2.0 * c.n_layer * c.n_head_kv * hd * 2;  // K and V, bf16

  std::cerr << "conveyor gpu-bench: " << gpu::cuda_device_description(0) << "; measuring ceilings\n";
  const double copy_bw = gpu::cuda_measure_copy_bandwidth(int64_t{1} << 30);
  const double gemm_peak = gpu::cuda_measure_gemm_flops(o.gemm_size, o.gemm_size, o.gemm_size);

  gpu::cuda_executor_options eo;
  eo.block_size = bs;
  eo.num_kv_blocks = std::max(per_seq * max_b, (o.prompt_len + bs - 1) / bs);
  eo.max_num_batched_tokens = std::max(o.prompt_len, max_b);
  eo.max_num_seqs = std::max(max_b, 1);
  eo.gpu_memory_utilization = o.gpu_memory_utilization;
  const auto t_load = clock_type::now();
  auto ex = gpu::make_cuda_executor_dummy(c, eo);
  const double load_s = std::chrono::duration<double>(clock_type::now() - t_load).count();

  nlohmann::json out{{"device", gpu::cuda_device_description(0)},
                     {"model", c.name},
                     {"context", o.context},
                     {"copy_bandwidth_GBps", copy_bw / 1e9},
                     {"gemm_peak_TFLOPs", gemm_peak / 1e12},
                     {"gemm_peak_shape", o.gemm_size},
                     {"weight_bytes", weight_bytes},
                     {"load_s", load_s}};
  std::printf("device: %s\ncopy bandwidth (read+write): %.0f GB/s; cuBLASLt bf16 GEMM %d^3: %.0f TFLOP/s\n",
              gpu::cuda_device_description(0).c_str(), copy_bw / 1e9, o.gemm_size, gemm_peak / 1e12);
  std::printf("%-8s %-10s %-12s %-14s %-12s %-14s %-10s\n", "batch", "context", "step ms", "pipelined ms", "floor ms",
              "floor/step", "tokens/s");
  for (int32_t b : o.batches) {
    fill_contexts(*ex, b, o.context, per_seq, eo.max_num_batched_tokens, c.vocab_size);
    for (int32_t w = 0; w < 3; ++w) ex->step(make_bench_plan(b, o.context + w, 1, per_seq, c.vocab_size));  // graph capture
    double total_ms = 0;
    for (int32_t i = 0; i < o.steps; ++i) total_ms += time_step_ms(*ex, make_bench_plan(b, o.context + 3 + i, 1, per_seq, c.vocab_size));
    const double step_ms = total_ms / o.steps;
    // The same decodes pipelined (the server's loop on a GPU): the host's share of a step hidden.
    const int32_t ctx0 = o.context + 3 + o.steps;
    const double pipe_ms = time_pipelined_ms(*ex, o.steps, [&](int32_t i) { return make_bench_plan(b, ctx0 + i, 1, per_seq, c.vocab_size); });
    const double ctx_mean = o.context + 3 + (o.steps - 1) / 2.0 + 1;
    const double floor_ms = (weight_bytes + b * ctx_mean * kv_bytes_per_pos) / copy_bw * 1e3;
    std::printf("%-8d %-10d %-12.3f %-14.3f %-12.3f %-14.2f %-10.0f\n", b, o.context, step_ms, pipe_ms, floor_ms,
                floor_ms / pipe_ms, 1000.0 * b / pipe_ms);
    out["decode"].push_back({{"batch", b},
                             {"step_ms", step_ms},
                             {"pipelined_step_ms", pipe_ms},
                             {"floor_ms", floor_ms},
                             {"tokens_per_s", 1000.0 * b / pipe_ms}});
  }
  // Prefill: one sequence of prompt_len tokens in one step, twice (the second is timed).
  const step_plan pre = make_bench_plan(1, 0, o.prompt_len, (o.prompt_len + bs - 1) / bs, c.vocab_size);
  ex->step(pre);
  const double pre_ms = time_step_ms(*ex, pre);
  const double T = o.prompt_len;
  const double flops = 2.0 * T * layer_params * c.n_layer + 2.0 * d * c.vocab_size +
                       4.0 * (T * (T + 1) / 2) * hd * c.n_head * c.n_layer;  // projections, head (1 row), attention
  std::printf("prefill %d tokens: %.2f ms, %.0f TFLOP/s (%.0f%% of the GEMM ceiling)\n", o.prompt_len, pre_ms,
              flops / pre_ms / 1e9, 100.0 * flops / (pre_ms / 1e3) / gemm_peak);
  out["prefill"] = {{"tokens", o.prompt_len}, {"ms", pre_ms}, {"TFLOPs", flops / pre_ms / 1e9}};
  if (o.anyscale_prompts > 0) {
    sim::workload_params wp;
    wp.num_prompts = o.anyscale_prompts;
    wp.cap = o.anyscale_cap;
    const auto reqs = sim::make_workload(wp);
    if (!o.workload_json.empty()) {
      nlohmann::json wj = nlohmann::json::array();
      for (const auto& r : reqs) wj.push_back({{"prompt", r.prompt}, {"output_len", r.output_len}});
      if (!write_output("gpu-bench", error_sink::plain, "--workload-json", o.workload_json, wj.dump() + "\n")) return 2;
    }
    for (batching_mode mode : {batching_mode::continuous, batching_mode::static_batch}) {
      const workload_run w = run_workload(*ex, reqs, mode, eo.max_num_seqs, eo.max_num_batched_tokens);
      std::printf("anyscale %d requests, cap %d, %s batching: %.1f s, %.0f output tokens/s, %.2f requests/s (%d steps)\n",
                  o.anyscale_prompts, o.anyscale_cap, to_string(mode), w.seconds, w.output_tokens / w.seconds,
                  o.anyscale_prompts / w.seconds, w.steps);
      out["anyscale"][to_string(mode)] = {{"seconds", w.seconds}, {"output_tokens", w.output_tokens}, {"steps", w.steps},
                                          {"output_tokens_per_s", w.output_tokens / w.seconds}};
    }
  }
  if (!o.no_verify && !o.draft_batches.empty() && !o.drafts.empty()) {
    ex.reset();  // its memory, before the batch-invariant executor takes its own
    bench_verification(c, o, eo, out);
  }
  if (!o.json_path.empty() && !write_output("gpu-bench", error_sink::plain, "--json", o.json_path, out.dump(2) + "\n"))
    return 2;
  return 0;
}

} // namespace

void register_gpu_bench(CLI::App& app, int& exit_code) {
  auto [cmd, o] = add_command<gpu_bench_opts>(
      app, exit_code, "gpu-bench", "CUDA executor speed on Llama-3-8B-shaped random weights vs the bandwidth and GEMM ceilings",
      [](const gpu_bench_opts& opts) {
        if (opts.batches.empty() || opts.context < 1 || opts.steps < 1 || opts.prompt_len < 1) {
          std::cerr << "conveyor gpu-bench: --batches must be non-empty; --context, --steps, --prompt-len >= 1\n";
          return 2;
        }
        const auto bad = [](const std::vector<int32_t>& v, int32_t lo, int32_t hi) {
          return std::any_of(v.begin(), v.end(), [&](int32_t x) { return x < lo || x > hi; });
        };
        if (bad(opts.draft_batches, 1, 256) || bad(opts.drafts, 1, 16)) {
          std::cerr << "conveyor gpu-bench: --draft-batches must be in 1..256 and --drafts in 1..16 (or --no-verify)\n";
          return 2;
        }
        return run_failing_with("gpu-bench", 1, [&] { return run_gpu_bench(opts); });
      });
  cmd->add_option("--batches", o->batches, "Decode batch sizes")->capture_default_str();
  cmd->add_option("--context", o->context, "Cached tokens per sequence before the timed decode steps")->capture_default_str();
  cmd->add_option("--steps", o->steps, "Timed decode steps per batch size")->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Tokens of the timed prefill step")->capture_default_str();
  cmd->add_option("--gemm-size", o->gemm_size, "m = n = k of the GEMM ceiling measurement")->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "Fraction of GPU memory to use")->capture_default_str();
  cmd->add_option("--anyscale-prompts", o->anyscale_prompts, "Requests of the Anyscale workload run (0: skip it)")->capture_default_str();
  cmd->add_option("--anyscale-cap", o->anyscale_cap, "Longest output of the Anyscale workload")->capture_default_str();
  cmd->add_option("--workload-json", o->workload_json, "Write the Anyscale workload's prompts and output lengths here");
  cmd->add_option("--draft-batches", o->draft_batches, "Batch sizes of the verification steps")->capture_default_str();
  cmd->add_option("--drafts", o->drafts, "Drafted tokens per sequence in the verification steps")->capture_default_str();
  cmd->add_flag("--no-verify", o->no_verify, "Skip the verification steps (speculative decoding)");
  cmd->add_option("--json", o->json_path, "Write the results as JSON here");
}

} // namespace conveyor::tools
