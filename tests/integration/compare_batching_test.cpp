// `conveyor bench --compare-batching` end to end: it starts its own `conveyor serve` children
// (null executor) in static and continuous mode per cap, and its JSON pairs equal workloads; a
// server that cannot start fails the run with that server's log.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace conveyor::testing {
namespace {

using json = nlohmann::json;

struct compare_result {
  int code = -1;
  std::string output;
  json result;
  std::string svg;
};

compare_result run_compare(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path() / ("conveyor-compare-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "out.txt").string(), json_path = (dir / "r.json").string(), svg = (dir / "r.svg").string();
  const std::string cmd = std::string(CONVEYOR_BINARY_DIR) + "/conveyor bench --compare-batching --no-progress --timeout 120 --json " +
                          json_path + " --plot " + svg + " --work-dir " + (dir / "work").string() + " " + args + " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  compare_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream o(out);
  r.output.assign(std::istreambuf_iterator<char>(o), {});
  if (std::ifstream j(json_path); j) r.result = json::parse(j, nullptr, false);
  if (std::ifstream s(svg); s) r.svg.assign(std::istreambuf_iterator<char>(s), {});
  std::filesystem::remove_all(dir);
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(compare_batching)

BOOST_AUTO_TEST_CASE(both_modes_run_the_same_workload_for_every_cap) {
  const compare_result r = run_compare("--serve-args \"--device null --max-num-seqs 16\" --num-prompts 24 --caps 8,64");
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.output);
  const json& j = r.result;
  BOOST_REQUIRE(j.is_object());
  BOOST_TEST(j["workload"].get<std::string>().find("24 prompts of 128 tokens") != std::string::npos);
  BOOST_REQUIRE(j["runs"].size() == 4u);
  const char* order[][2] = {{"8", "static"}, {"8", "continuous"}, {"64", "static"}, {"64", "continuous"}};
  for (size_t i = 0; i < 4; ++i) {
    const json& run = j["runs"][i];
    BOOST_TEST_CONTEXT("run " << i) {
      BOOST_TEST(std::to_string(run["cap"].get<int>()) == order[i][0]);
      BOOST_TEST(run["batching"] == order[i][1]);
      BOOST_TEST(run["completed"] == 24);
      BOOST_TEST(run["failed"] == 0);
      BOOST_TEST(run["preemptions"] == 0);  // the server answered stats; 4096 blocks never run short here
      BOOST_TEST(run["total_input_tokens"] == 24 * 128);
      BOOST_TEST(run["output_throughput"].get<double>() > 0.0);
    }
  }
  // Same requests in both modes: same token counts; cap 8 forces every output to <= 8 tokens.
  BOOST_TEST(j["runs"][0]["total_output_tokens"] == j["runs"][1]["total_output_tokens"]);
  BOOST_TEST(j["runs"][2]["total_output_tokens"] == j["runs"][3]["total_output_tokens"]);
  BOOST_TEST(j["runs"][0]["total_output_tokens"].get<int>() <= 24 * 8);
  BOOST_TEST(j["runs"][2]["total_output_tokens"].get<int>() > j["runs"][0]["total_output_tokens"].get<int>());
  const double ratio = j["output_throughput_ratio"]["64"].get<double>();
  BOOST_TEST(ratio == j["runs"][3]["output_throughput"].get<double>() / j["runs"][2]["output_throughput"].get<double>(),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(r.output.find("Static vs continuous batching") != std::string::npos);
  BOOST_TEST(r.svg.find("<svg") == 0u);
  BOOST_TEST(r.svg.find("cap 64") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_server_that_cannot_start_fails_the_run_with_its_log) {
  const compare_result r = run_compare("--serve-args \"--device null --no-such-flag\" --num-prompts 4 --caps 8 --connect-timeout 20");
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.output.find("static-cap8") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("the server exited") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("--no-such-flag") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_CASE(bad_caps_are_refused) {
  const compare_result r = run_compare("--caps 0");
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.output.find("--caps values must be >= 1") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
