// `conveyor bench`'s settings as the command line gives them, shared by the plain run
// (cmd_bench.cpp) and --compare-batching (cmd_bench_compare.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/driver.hpp"
#include "tools/bench/report.hpp"
#include "tools/bench/wire.hpp"
#include "tools/bench/workload.hpp"

namespace conveyor::tools {

struct bench_opts {
  bench::driver_options driver;
  bench::run_settings run;
  std::string workload = "random", input_dist = "fixed", output_dist = "fixed", request_rate = "inf";
  std::vector<std::string> goodput;
  std::string json_path, plot_path;
  bool detailed = false, no_progress = false;
  std::optional<uint64_t> job_seed;
  /// Which flags were given (compare-batching sizes its default run for the machine).
  bool given_workload = false, given_num_prompts = false, given_input_len = false, given_connect_timeout = false;

  // --compare-batching
  bool compare = false;
  std::vector<int32_t> caps{32, 128, 512};
  std::string serve_args;  // extra `conveyor serve` flags, split on whitespace
  std::string work_dir;    // server logs (and traces); "" = a fresh /tmp directory
  bool trace = false;      // pass --trace to each server, files in work_dir
};

/// Checks the options and fills the typed settings from the strings. Returns "" or the error.
std::string parse_bench_opts(bench_opts& o);

/// The run's requests with their arrival times. Returns "" or the error (a bad --dataset).
std::string make_run_requests(const bench_opts& o, std::vector<bench::bench_request>& out);

/// The server's stats reply (the stats op), or nullopt when it does not answer within 5 s.
std::optional<bench::reply_view> server_stats(const std::string& router_ep);

/// `conveyor bench --compare-batching`: exit code.
int run_compare_batching(bench_opts& o);

} // namespace conveyor::tools
