// `conveyor bench` (the binary) against an in-process null-executor server on loopback: the JSON
// adds up (completed, tokens, percentiles in order), gaps are repaired, refusals are counted,
// the SVG is written, bad flags and a missing server fail with short errors.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include "server_fixture.hpp"

namespace conveyor::testing {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("conveyor-bench-" + std::to_string(::getpid()) + "-" + name)).string();
}

struct bench_run {
  int code = -1;
  std::string output;
  json result;
};

bench_run run_bench(const server& srv, const std::string& args) {
  const std::string out = temp_path("out.txt"), json_path = temp_path("result.json");
  std::filesystem::remove(json_path);
  const std::string cmd = std::string(CONVEYOR_BINARY_DIR) + "/conveyor bench --router " + srv.rt->router_endpoint() + " --pub " +
                          srv.rt->pub_endpoint() + " --json " + json_path + " --no-progress --timeout 120 " + args + " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  bench_run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream o(out);
  r.output.assign(std::istreambuf_iterator<char>(o), {});
  if (std::ifstream j(json_path); j) r.result = json::parse(j, nullptr, false);
  std::filesystem::remove(out);
  std::filesystem::remove(json_path);
  return r;
}

// The invariants every successful run's JSON must satisfy.
void check_consistent(const json& j) {
  BOOST_TEST(j["streamed_output_tokens"] == j["total_output_tokens"]);  // every token arrived, live or fetched
  BOOST_TEST(j["num_gaps"].get<int>() <= j["num_fetches"].get<int>());
  const double d = j["duration"].get<double>();
  BOOST_TEST(d > 0.0);
  BOOST_TEST(j["request_throughput"].get<double>() == j["completed"].get<double>() / d, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(j["output_throughput"].get<double>() == j["total_output_tokens"].get<double>() / d, boost::test_tools::tolerance(1e-9));
  for (const std::string m : {"ttft", "tpot", "itl", "e2el"}) {
    BOOST_TEST_CONTEXT(m) {
      BOOST_TEST(j["median_" + m + "_ms"].get<double>() <= j["p90_" + m + "_ms"].get<double>());
      BOOST_TEST(j["p90_" + m + "_ms"].get<double>() <= j["p99_" + m + "_ms"].get<double>());
      BOOST_TEST(j["mean_" + m + "_ms"].get<double>() >= 0.0);
    }
  }
  BOOST_TEST(j["p99_ttft_ms"].get<double>() <= j["p99_e2el_ms"].get<double>());
  BOOST_TEST(j["median_e2el_ms"].get<double>() <= d * 1e3);
}

} // namespace

BOOST_AUTO_TEST_SUITE(bench_cli)

BOOST_AUTO_TEST_CASE(fifty_prompts_under_a_concurrency_cap_complete_without_gaps) {
  server srv("null");
  const std::string svg = temp_path("plot.svg");
  const bench_run r = run_bench(srv, "--workload random --input-len 16 --output-len 32 --num-prompts 50 --max-concurrency 8 "
                                     "--goodput ttft:60000 tpot:60000 --plot " + svg);
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  const json& j = r.result;
  BOOST_REQUIRE(j.is_object());
  BOOST_TEST(j["completed"] == 50);
  BOOST_TEST(j["rejected"] == 0);
  BOOST_TEST(j["failed"] == 0);
  BOOST_TEST(j["total_input_tokens"] == 50 * 16);
  BOOST_TEST(j["total_output_tokens"] == 50 * 32);
  BOOST_TEST(j["finish_reasons"]["length"] == 50);
  // At most 8 streams of 34 events are ever unread, far below the PUB queue: nothing is lost.
  BOOST_TEST(j["num_gaps"] == 0);
  BOOST_TEST(j["max_concurrency"] == 8);
  BOOST_TEST(j["request_goodput"].get<double>() == j["request_throughput"].get<double>(), boost::test_tools::tolerance(1e-9));
  check_consistent(j);
  BOOST_TEST(r.output.find("Serving Benchmark Result") != std::string::npos);
  std::ifstream s(svg);
  const std::string text((std::istreambuf_iterator<char>(s)), {});
  BOOST_TEST(text.find("<svg") == 0u);
  BOOST_TEST(text.find("E2EL CDF (50 requests)") != std::string::npos);
  std::filesystem::remove(svg);
}

BOOST_AUTO_TEST_CASE(all_at_once_anyscale_and_poisson_runs_add_up) {
  server srv("null");
  const bench_run burst = run_bench(srv, "--workload anyscale --cap 32 --num-prompts 50 --vocab-size 49152 --save-detailed");
  BOOST_REQUIRE_MESSAGE(burst.code == 0, burst.output);
  BOOST_TEST(burst.result["completed"] == 50);
  BOOST_TEST(burst.result["total_input_tokens"] == 50 * 512);
  BOOST_TEST(burst.result["output_lens"].size() == 50u);
  check_consistent(burst.result);

  const bench_run poisson = run_bench(srv, "--workload random --input-len 8 --output-len 16 --output-dist uniform --num-prompts 40 --request-rate 400 --seed 3");
  BOOST_REQUIRE_MESSAGE(poisson.code == 0, poisson.output);
  BOOST_TEST(poisson.result["completed"] == 40);
  BOOST_TEST(poisson.result["arrivals"] == "poisson");
  check_consistent(poisson.result);
}

BOOST_AUTO_TEST_CASE(chat_and_jsonl_workloads_run) {
  server srv("null");
  const bench_run chat = run_bench(srv, "--workload chat --input-len 40 --output-len 8 --cap 16 --num-prompts 20");
  BOOST_REQUIRE_MESSAGE(chat.code == 0, chat.output);
  BOOST_TEST(chat.result["completed"] == 20);
  BOOST_TEST(chat.result["total_input_tokens"].get<int>() > 20 * 20);  // template + words
  check_consistent(chat.result);

  const std::string file = temp_path("prompts.jsonl");
  std::ofstream(file) << R"({"prompt": "Hello there", "max_tokens": 5})" << "\n"
                      << R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3})" << "\n";
  const bench_run f = run_bench(srv, "--workload file --dataset " + file + " --num-prompts 6 --ignore-eos");
  BOOST_REQUIRE_MESSAGE(f.code == 0, f.output);
  BOOST_TEST(f.result["completed"] == 6);
  BOOST_TEST(f.result["total_output_tokens"] == 3 * 5 + 3 * 3);
  std::filesystem::remove(file);
}

BOOST_AUTO_TEST_CASE(refusals_are_counted_or_retried) {
  server srv("null", [](serve::runtime_options& o) {
    o.sched.max_num_seqs = 2;
    o.sched.max_num_queued_reqs = 2;
  });
  const std::string args = "--workload random --input-len 8 --output-len 64 --num-prompts 40";
  const bench_run counted = run_bench(srv, args);
  BOOST_REQUIRE_MESSAGE(counted.code == 0, counted.output);
  BOOST_TEST(counted.result["completed"].get<int>() + counted.result["rejected"].get<int>() == 40);
  BOOST_TEST(counted.result["failed"] == 0);
  const bench_run retried = run_bench(srv, args + " --retry-overloaded");
  BOOST_REQUIRE_MESSAGE(retried.code == 0, retried.output);
  BOOST_TEST(retried.result["completed"] == 40);
  BOOST_TEST(retried.result["rejected"] == 0);
  check_consistent(retried.result);
}

BOOST_AUTO_TEST_CASE(against_the_cpu_executor_on_smollm2_the_json_adds_up) {
  server srv("cpu");
  const bench_run r = run_bench(srv, "--workload random --input-len 16 --output-len 8 --num-prompts 8 --max-concurrency 4 --vocab-size 49152");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  const json& j = r.result;
  BOOST_TEST(j["completed"] == 8);
  BOOST_TEST(j["failed"] == 0);
  BOOST_TEST(j["total_input_tokens"] == 8 * 16);
  BOOST_TEST(j["total_output_tokens"] == 8 * 8);
  BOOST_TEST(j["num_gaps"] == 0);
  // A real model takes real time: every request's TTFT covers at least one forward pass.
  BOOST_TEST(j["mean_ttft_ms"].get<double>() > 1.0);
  BOOST_TEST(j["mean_tpot_ms"].get<double>() > 0.5);
  check_consistent(j);
}

BOOST_AUTO_TEST_CASE(bad_flags_exit_2_and_a_missing_server_exits_1) {
  server srv("null");
  for (const std::string bad : {"--workload nope", "--request-rate 0", "--goodput itl:5", "--workload file", "--input-dist zipf"}) {
    const bench_run r = run_bench(srv, bad);
    BOOST_TEST(r.code == 2, bad << ": " << r.output);
    BOOST_TEST(r.output.find("conveyor bench:") != std::string::npos, r.output);
  }
  const std::string cmd = std::string(CONVEYOR_BINARY_DIR) + "/conveyor bench --router tcp://127.0.0.1:1 --pub tcp://127.0.0.1:2 "
                          "--connect-timeout 0.3 --no-progress >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  BOOST_TEST(WEXITSTATUS(status) == 1);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
