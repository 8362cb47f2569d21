// `conveyor bench`: a load generator speaking the protocol (DEALER submit + SUB streams) that
// measures a running server as vLLM's benchmark_serving does: TTFT, TPOT, ITL, E2EL, request
// and token throughput, goodput. Workloads random | anyscale | chat | file; arrivals all at
// once, Poisson/gamma at --request-rate, capped by --max-concurrency. Progress on stderr, the
// table on stdout, --json FILE with vLLM's key names, --plot FILE.svg with latency CDFs.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>

#include "tools/bench/driver.hpp"
#include "tools/bench/metrics.hpp"
#include "tools/bench/plot.hpp"
#include "tools/bench/report.hpp"
#include "tools/bench/workload.hpp"
#include "tools/bench_cli.hpp"
#include "tools/command.hpp"
#include "tools/commands.hpp"

namespace conveyor::tools {
std::string parse_bench_opts(bench_opts& o) {
  bench::workload_options& w = o.run.workload;
  const auto name = bench::parse_workload_name(o.workload);
  if (!name) return "--workload must be random, anyscale, chat or file";
  w.name = *name;
  const auto in = bench::parse_length_dist(o.input_dist), out = bench::parse_length_dist(o.output_dist);
  if (!in || !out) return "--input-dist and --output-dist must be fixed, uniform, capped-exp or lognormal";
  w.input_dist = *in;
  w.output_dist = *out;
  if (w.name == bench::workload_name::file && o.run.dataset.empty()) return "--workload file needs --dataset FILE.jsonl";
  if (w.name != bench::workload_name::file && !o.run.dataset.empty()) return "--dataset needs --workload file";
  if (auto e = w.validate(); !e.empty()) return e;
  if (w.name == bench::workload_name::anyscale && o.given_input_len) w.anyscale_input_len = w.input_len;
  double& rate = o.run.arrivals.request_rate;
  if (o.request_rate == "inf") {
    rate = INFINITY;
  } else {
    char* end = nullptr;
    rate = std::strtod(o.request_rate.c_str(), &end);
    if (*end != '\0' || !(rate > 0.0) || !std::isfinite(rate)) return "--request-rate must be a number > 0 or inf";
  }
  if (!(o.run.arrivals.burstiness > 0.0)) return "--burstiness must be > 0";
  if (o.run.max_concurrency < 0) return "--max-concurrency must be >= 0 (0: no cap)";
  for (double p : o.run.percentiles)
    if (!(p >= 0.0 && p <= 100.0)) return "--metric-percentiles must lie in [0, 100]";
  if (!(o.driver.timeout_s >= 0.0)) return "--timeout must be >= 0";
  if (!(o.driver.connect_timeout_s > 0.0)) return "--connect-timeout must be > 0";
  if (!(o.driver.stall_s > 0.0)) return "--stall-fetch must be > 0";
  o.driver.max_concurrency = o.run.max_concurrency;
  o.driver.submit.seed = o.job_seed;
  o.run.router_ep = o.driver.router_ep;
  o.run.pub_ep = o.driver.pub_ep;
  return bench::parse_goodput(o.goodput, o.run.slo);
}

std::string make_run_requests(const bench_opts& o, std::vector<bench::bench_request>& requests) {
  const bench::workload_options& w = o.run.workload;
  if (w.name == bench::workload_name::file) {
    std::ifstream in(o.run.dataset);
    if (!in) return "cannot open --dataset " + o.run.dataset;
    try {
      requests = bench::read_requests(in, w);
    } catch (const std::invalid_argument& e) {
      return o.run.dataset + ": " + e.what();
    }
  } else {
    requests = bench::make_requests(w);
  }
  const auto arrivals = bench::arrival_times(static_cast<int32_t>(requests.size()), o.run.arrivals, w.seed);
  for (size_t i = 0; i < requests.size(); ++i) requests[i].arrival_s = arrivals[i];
  return "";
}

namespace {

std::string now_date() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

int run_bench(bench_opts& o) {
  if (o.compare) return run_compare_batching(o);
  if (auto e = parse_bench_opts(o); !e.empty()) {
    std::cerr << "conveyor bench: " << e << "\n";
    return 2;
  }
  const bench::workload_options& w = o.run.workload;
  std::vector<bench::bench_request> requests;
  if (auto e = make_run_requests(o, requests); !e.empty()) {
    std::cerr << "conveyor bench: " << e << "\n";
    return 2;
  }
  o.run.date = now_date();

  // Speculative decoding's counters before and after (the stats op); nothing when the server does
  // not answer yet (the driver then waits for it) or has none.
  const std::optional<bench::reply_view> before = server_stats(o.driver.router_ep);
  bench::driver_result d;
  try {
    d = bench::run_driver(o.driver, requests, [&](const bench::progress& p) {
      if (!o.no_progress) std::cerr << "\r" << bench::progress_line(p) << std::flush;
    });
    if (!o.no_progress) std::cerr << "\n";
  } catch (const bench::connect_error& e) {
    std::cerr << "conveyor bench: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {  // zmq::error_t: a bad endpoint
    std::cerr << "conveyor bench: " << e.what() << " (check --router and --pub)\n";
    return 2;
  }
  const bench::bench_metrics m = bench::compute_metrics(d.timelines, o.run.slo, o.run.percentiles);
  std::cout << bench::format_table(o.run, d, m) << std::flush;
  nlohmann::json out = bench::to_json(o.run, d, m, o.detailed);
  if (const auto after = server_stats(o.driver.router_ep); after && after->spec_drafts_total >= 0) {
    const auto base = [&](int64_t bench::reply_view::*f) { return before && (*before).*f >= 0 ? (*before).*f : int64_t{0}; };
    const int64_t drafts = after->spec_drafts_total - base(&bench::reply_view::spec_drafts_total);
    const int64_t drafted = after->spec_draft_tokens_total - base(&bench::reply_view::spec_draft_tokens_total);
    const int64_t accepted = after->spec_accepted_tokens_total - base(&bench::reply_view::spec_accepted_tokens_total);
    const double rate = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
    const double mean_len = drafts > 0 ? 1.0 + static_cast<double>(accepted) / static_cast<double>(drafts) : 0.0;
    std::printf("Speculative decoding:  %lld verifications, %lld drafted tokens, %lld accepted (acceptance rate %.1f%%, mean "
                "accepted length %.2f)\n",
                static_cast<long long>(drafts), static_cast<long long>(drafted), static_cast<long long>(accepted), 100.0 * rate, mean_len);
    out["spec_decode_num_drafts"] = drafts;
    out["spec_decode_num_draft_tokens"] = drafted;
    out["spec_decode_num_accepted_tokens"] = accepted;
    out["spec_decode_acceptance_rate"] = rate;
    out["spec_decode_mean_accepted_length"] = mean_len;
  }
  if (!o.json_path.empty() && !write_output("bench", error_sink::plain, "--json", o.json_path, out.dump(1) + "\n")) return 2;
  if (!o.plot_path.empty()) {
    bench::plot_input p;
    p.title = "conveyor bench: " + std::string(bench::to_string(w.name)) + ", " + std::to_string(m.completed) +
              " requests, " + std::to_string(static_cast<int64_t>(m.output_throughput)) + " output tok/s";
    p.samples = m.samples;
    p.output_rate = bench::output_rate_series(d.timelines, 60, p.bin_s);
    if (!write_output("bench", error_sink::plain, "--plot", o.plot_path, bench::render_svg(p))) return 2;
  }
  return 0;
}

} // namespace

void register_bench(CLI::App& app, int& exit_code) {
  auto [cmd, o] = add_command<bench_opts>(
      app, exit_code, "bench", "Load-test a running `conveyor serve` and report vLLM-style serving metrics",
      [](bench_opts& opts, CLI::App& self) {
        opts.given_workload = self.count("--workload") > 0;
        opts.given_num_prompts = self.count("--num-prompts") > 0;
        opts.given_input_len = self.count("--input-len") > 0;
        opts.given_connect_timeout = self.count("--connect-timeout") > 0;
        return run_bench(opts);
      });
  bench::workload_options& w = o->run.workload;
  cmd->add_option("--router", o->driver.router_ep, "The server's ROUTER endpoint")->capture_default_str();
  cmd->add_option("--pub", o->driver.pub_ep, "The server's PUB endpoint")->capture_default_str();
  cmd->add_option("--workload", o->workload,
                  "random | anyscale (512-token prompts or --input-len, outputs exponential mean 128 capped at --cap) | chat | file")
      ->capture_default_str();
  cmd->add_option("--dataset", o->run.dataset, "JSONL prompts for --workload file: {\"prompt\"|\"messages\"|\"prompt_tokens\", \"max_tokens\"?}");
  cmd->add_option("--num-prompts", w.num_prompts, "Requests in the run")->capture_default_str();
  cmd->add_option("--input-len", w.input_len, "Prompt tokens (random; chat: about this many words)")->capture_default_str();
  cmd->add_option("--output-len", w.output_len, "Output tokens, or their distribution's centre/mean")->capture_default_str();
  cmd->add_option("--input-dist", o->input_dist, "random: fixed | uniform | capped-exp | lognormal")->capture_default_str();
  cmd->add_option("--output-dist", o->output_dist, "random: fixed | uniform | capped-exp | lognormal")->capture_default_str();
  cmd->add_option("--range-ratio", w.range_ratio, "uniform: lengths in [len*(1-r), len*(1+r)]")->capture_default_str();
  cmd->add_option("--lognormal-sigma", w.lognormal_sigma, "lognormal: sigma (the mean is the length)")->capture_default_str();
  cmd->add_option("--cap", w.cap, "Longest capped-exp/lognormal length (anyscale: 32|128|512|1536)")->capture_default_str();
  cmd->add_option("--vocab-size", w.vocab_size, "Prompt ids are drawn from [100, min(this, 50001))")->capture_default_str();
  cmd->add_flag("--ignore-eos", w.ignore_eos, "chat/file: force max_tokens outputs (random/anyscale always do)");
  cmd->add_option("--seed", w.seed, "Workload and arrival seed")->capture_default_str();
  cmd->add_option("--request-rate", o->request_rate, "Mean requests/s (Poisson), or inf: all at once")->capture_default_str();
  cmd->add_option("--burstiness", o->run.arrivals.burstiness, "Gamma shape of arrival gaps (1 = Poisson)")->capture_default_str();
  cmd->add_option("--max-concurrency", o->run.max_concurrency, "Most requests in flight (0: no cap)")->capture_default_str();
  cmd->add_option("--temperature", o->driver.submit.temperature, "Sampling temperature of every job")->capture_default_str();
  cmd->add_option("--job-seed", o->job_seed, "Per-job sampling seed base (job i gets base + i)");
  cmd->add_option("--goodput", o->goodput, "SLOs for goodput, e.g. --goodput ttft:500 tpot:50 (ms; also e2el:MS)");
  cmd->add_option("--metric-percentiles", o->run.percentiles, "Percentiles to report")->delimiter(',')->capture_default_str();
  cmd->add_flag("--retry-overloaded", o->driver.retry_overloaded, "Resend submits refused with overloaded (backoff) instead of counting them");
  cmd->add_option("--connect-timeout", o->driver.connect_timeout_s, "Seconds to wait for the server's health reply and first heartbeat")
      ->capture_default_str();
  cmd->add_option("--stall-fetch", o->driver.stall_s, "Seconds without an event before a live job is fetched (lost tails)")
      ->capture_default_str();
  cmd->add_option("--timeout", o->driver.timeout_s, "Stop after this many seconds (0: wait for every job)")->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write the results (vLLM key names) to this JSON file");
  cmd->add_flag("--save-detailed", o->detailed, "Add per-request input_lens, output_lens, ttfts, itls to --json");
  cmd->add_option("--plot", o->plot_path, "Write latency CDFs and throughput over time to this SVG file");
  cmd->add_flag("--no-progress", o->no_progress, "No progress bar on stderr");
  cmd->add_flag("--compare-batching", o->compare,
                "Start `conveyor serve` in static and in continuous mode for each --caps value, run the workload "
                "(default: anyscale, 200 prompts of 128 tokens) against each, report the difference (--json, --plot)");
  cmd->add_option("--caps", o->caps, "compare-batching: output-length caps")->delimiter(',')->capture_default_str();
  cmd->add_option("--serve-args", o->serve_args,
                  "compare-batching: extra `conveyor serve` flags for both modes, e.g. \"--model smollm2 --max-num-seqs 64\"");
  cmd->add_option("--work-dir", o->work_dir, "compare-batching: where server logs (and traces) go (default: a new /tmp dir)");
  cmd->add_flag("--trace", o->trace, "compare-batching: each server writes an iteration trace into --work-dir");
}

} // namespace conveyor::tools
