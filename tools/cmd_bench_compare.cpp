// `conveyor bench --compare-batching`: the Anyscale experiment on this machine. For each cap it
// starts `conveyor serve --batching static`, runs the workload, stops it, then the same with
// `--batching continuous` (a fresh server per run: no prefix cache carries over), and reports
// both side by side (table on stdout, --json, --plot SVG). Servers listen on ipc:// endpoints in
// the work directory, so nothing else on the machine is disturbed; their logs stay there.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <zmq.hpp>

#include "tools/bench/compare.hpp"
#include "tools/bench/server_process.hpp"
#include "tools/bench_cli.hpp"
#include "tools/command.hpp"

namespace conveyor::tools {
namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string describe_workload(const bench::workload_options& w) {
  if (w.name != bench::workload_name::anyscale)
    return std::string(bench::to_string(w.name)) + ": " + std::to_string(w.num_prompts) + " prompts, cap per run";
  return "anyscale: " + std::to_string(w.num_prompts) + " prompts of " + std::to_string(w.anyscale_input_len) +
         " tokens, outputs exponential (mean 128) resampled until <= cap, all sent at once";
}

} // namespace

std::optional<bench::reply_view> server_stats(const std::string& router_ep) {
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(router_ep);
  const std::string req = bench::encode_stats();
  dealer.send(zmq::buffer(req), zmq::send_flags::none);
  zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  zmq::message_t msg;
  if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) <= 0 || !dealer.recv(msg, zmq::recv_flags::dontwait)) return std::nullopt;
  bench::decoder dec;
  const auto r = dec.reply(msg.data(), msg.size());
  if (r && r->ok) return r;
  return std::nullopt;
}

namespace {

// The server's preemption count (stats op), or -1 when it does not answer within 5 s.
int64_t server_preemptions(const std::string& router_ep) {
  const auto r = server_stats(router_ep);
  return r ? r->preemptions_total : -1;
}

// One server, one run. Throws std::runtime_error with the server's log tail on failure.
bench::compare_run run_one(const bench_opts& o, const std::string& dir, int32_t cap, const std::string& mode,
                           const std::vector<bench::bench_request>& requests, std::string& model) {
  const std::string tag = mode + "-cap" + std::to_string(cap);
  std::vector<std::string> args{"serve", "--batching", mode, "--router", "ipc://" + dir + "/router", "--pub",
                                "ipc://" + dir + "/pub", "--pull", "ipc://" + dir + "/pull"};
  // Each run journals into its own fresh directory: no job of an earlier run is remembered
  // (the requests reuse their ids) or resumed.
  const std::string state = dir + "/state-" + tag;
  std::error_code ec;
  std::filesystem::remove_all(state, ec);
  args.push_back("--state-dir");
  args.push_back(state);
  for (auto& a : split_words(o.serve_args)) args.push_back(std::move(a));
  if (o.trace) {
    args.push_back("--trace");
    args.push_back(dir + "/trace-" + tag + ".jsonl");
  }
  bench::server_process server(bench::self_executable(), args, dir + "/serve-" + tag + ".log");
  bench::driver_options d = o.driver;
  d.router_ep = args[4];
  d.pub_ep = args[6];
  bench::driver_result r;
  try {
    r = bench::run_driver(d, requests, [&](const bench::progress& p) {
      if (!o.no_progress) std::cerr << "\r[cap " << cap << " " << mode << "] " << bench::progress_line(p) << std::flush;
    });
    if (!o.no_progress) std::cerr << "\n";
  } catch (const std::exception& e) {
    const bool alive = server.running();
    throw std::runtime_error(tag + ": " + e.what() + (alive ? "" : " (the server exited)") + "\nserver log " + dir +
                             "/serve-" + tag + ".log:\n" + server.log_tail());
  }
  const int64_t preemptions = server_preemptions(d.router_ep);
  const int status = server.stop();
  if (status != 0) std::cerr << "conveyor bench: warning: the " << tag << " server exited with status " << status << "\n";
  model = r.model;
  bench::compare_run run;
  run.cap = cap;
  run.batching = mode;
  run.num_requests = static_cast<int32_t>(requests.size());
  run.failed = r.rejected + r.failed + r.unfinished;
  run.preemptions = preemptions;
  run.metrics = bench::compute_metrics(r.timelines, o.run.slo, o.run.percentiles);
  return run;
}


} // namespace

int run_compare_batching(bench_opts& o) {
  // Sized for a small machine unless told otherwise: the 200 prompts of 128 tokens.
  if (!o.given_workload) o.workload = "anyscale";
  if (!o.given_num_prompts) o.run.workload.num_prompts = 200;
  if (!o.given_input_len && o.workload == "anyscale") {
    o.run.workload.input_len = 128;
    o.given_input_len = true;
  }
  if (!o.given_connect_timeout) o.driver.connect_timeout_s = 120.0;  // the server loads its model first
  if (auto e = parse_bench_opts(o); !e.empty()) {
    std::cerr << "conveyor bench: " << e << "\n";
    return 2;
  }
  if (o.caps.empty()) {
    std::cerr << "conveyor bench: --caps needs at least one value\n";
    return 2;
  }
  for (int32_t c : o.caps)
    if (c < 1) {
      std::cerr << "conveyor bench: --caps values must be >= 1\n";
      return 2;
    }
  std::string dir = o.work_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/conveyor-compare-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      std::cerr << "conveyor bench: cannot create a work directory in /tmp\n";
      return 1;
    }
    dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      std::cerr << "conveyor bench: cannot create --work-dir " << dir << ": " << ec.message() << "\n";
      return 2;
    }
  }
  std::cerr << "conveyor bench: comparing static and continuous batching; server logs in " << dir << "\n";

  bench::compare_setup setup;
  setup.workload = describe_workload(o.run.workload);
  setup.server_args = o.serve_args;
  std::vector<bench::compare_run> runs;
  try {
    for (int32_t cap : o.caps) {
      o.run.workload.cap = cap;
      std::vector<bench::bench_request> requests;
      if (auto e = make_run_requests(o, requests); !e.empty()) {
        std::cerr << "conveyor bench: " << e << "\n";
        return 2;
      }
      for (const char* mode : {"static", "continuous"}) runs.push_back(run_one(o, dir, cap, mode, requests, setup.model));
    }
  } catch (const std::exception& e) {
    std::cerr << "conveyor bench: " << e.what();
    return 1;
  }
  std::cout << bench::format_compare_table(setup, runs) << std::flush;
  bool ok = true;
  if (!o.json_path.empty()) ok &= write_output("bench", error_sink::plain, "--json", o.json_path, bench::compare_to_json(setup, runs).dump(1) + "\n");
  if (!o.plot_path.empty()) ok &= write_output("bench", error_sink::plain, "--plot", o.plot_path, bench::render_compare_svg(setup, runs));
  return ok ? 0 : 2;
}

} // namespace conveyor::tools
