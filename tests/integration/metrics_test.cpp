// /metrics over HTTP while jobs run: the gauges parse, and once every job is done the counters
// add up to what was sent (tokens, finishes, rejections), every histogram counted each request,
// and the `stats` op reports the same numbers. Also: off by default, 404 elsewhere, and a taken
// port is a clear error (exit code 2 from `conveyor serve`).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <map>
#include <sstream>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

#include "model/formats/gguf_writer.hpp"
#include "server_fixture.hpp"
#include "tiny_model.hpp"
#include "transport/sockets.hpp"

namespace conveyor::testing {
namespace {

using samples = std::map<std::string, double>;  // "name{labels}" -> value

// Parses the text exposition; fails the test on a malformed sample line.
samples parse(const std::string& text) {
  samples out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    BOOST_REQUIRE_MESSAGE(sp != std::string::npos && sp > 0, "malformed sample line: " << line);
    size_t used = 0;
    const std::string value = line.substr(sp + 1);
    const double v = value == "+Inf" ? HUGE_VAL : std::stod(value, &used);
    BOOST_REQUIRE_MESSAGE(value == "+Inf" || used == value.size(), "malformed value: " << line);
    out[line.substr(0, sp)] = v;
  }
  return out;
}

samples scrape(httplib::Client& http) {
  auto res = http.Get("/metrics");
  BOOST_REQUIRE_MESSAGE(res, "GET /metrics failed: " << httplib::to_string(res.error()));
  BOOST_REQUIRE_EQUAL(res->status, 200);
  BOOST_TEST(res->get_header_value("Content-Type").find("text/plain") == 0);
  return parse(res->body);
}

double at(const samples& s, const std::string& key) {
  auto it = s.find(key);
  BOOST_REQUIRE_MESSAGE(it != s.end(), "no sample " << key);
  return it->second;
}

const std::vector<std::string> kHistograms = {"time_to_first_token_seconds", "time_per_output_token_seconds",
                                              "inter_token_latency_seconds", "e2e_request_latency_seconds",
                                              "request_queue_time_seconds"};

// Every histogram's buckets are cumulative and end at +Inf == _count.
void check_histograms(const samples& s) {
  for (const auto& h : kHistograms) {
    double last = 0.0;
    for (const auto& [key, v] : s) {
      if (key.rfind("conveyor_" + h + "_bucket{", 0) != 0) continue;
      BOOST_TEST(v >= 0.0);
      if (key.find("+Inf") == std::string::npos) last = std::max(last, v);
    }
    const double count = at(s, "conveyor_" + h + "_count");
    BOOST_TEST(at(s, "conveyor_" + h + "_bucket{le=\"+Inf\"}") == count, h);
    BOOST_TEST(last <= count, h);
  }
}

json submit_tokens(producer& p, const std::string& id, int prompt_len, int max_tokens) {
  std::vector<int> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back(100 + i);
  return p.request({{"op", "submit"}, {"id", id}, {"prompt_tokens", prompt}, {"max_tokens", max_tokens},
                    {"min_tokens", max_tokens}, {"ignore_eos", true}, {"stream", false}});
}

} // namespace

BOOST_AUTO_TEST_SUITE(metrics_http)

BOOST_AUTO_TEST_CASE(counters_add_up_to_what_was_sent_and_stats_agrees) {
  server srv("null", [](serve::runtime_options& o) {
    o.metrics_port = 0;
    o.sched.max_num_seqs = 2;  // the later jobs wait: running + waiting > 0 while we scrape
    o.sched.max_model_len = 4096;
  });
  BOOST_REQUIRE(srv.rt->metrics_port() > 0);
  BOOST_TEST(srv.rt->metrics_url() == "http://127.0.0.1:" + std::to_string(srv.rt->metrics_port()) + "/metrics");
  httplib::Client http("127.0.0.1", srv.rt->metrics_port());
  http.set_read_timeout(10, 0);
  producer p(*srv.rt);

  const samples before = scrape(http);
  BOOST_TEST(at(before, "conveyor_prompt_tokens_total") == 0.0);
  BOOST_TEST(at(before, "conveyor_request_rejected_total{code=\"bad_request\"}") == 0.0);

  // Bad submits: three over ROUTER (decode error, bad value, token outside the vocabulary found
  // by the request actor) and one over PULL (its error event is published after it is counted).
  int bad = 0;
  for (const json& m : {json{{"op", "submit"}, {"id", "bad-1"}}, json{{"op", "submit"}, {"id", "bad-2"}, {"prompt", "x"}, {"max_tokens", 0}},
                        json{{"op", "submit"}, {"id", "bad-3"}, {"prompt_tokens", {1, 99999999}}}}) {
    const json r = p.request(m);
    BOOST_TEST(r["error"]["code"] == "bad_request", r.dump());
    ++bad;
  }
  p.subscribe("bad-pull");
  p.push({{"op", "submit"}, {"id", "bad-pull"}, {"prompt", "x"}, {"temperature", -1.0}});
  const auto pulled = p.collect("bad-pull", std::chrono::seconds(10));
  BOOST_REQUIRE(!pulled.empty());
  BOOST_TEST(pulled.back()["code"] == "bad_request");
  ++bad;

  const int n = 6, max_tokens = 2000;
  int64_t prompt_total = 0;
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back("m-" + std::to_string(i));
    p.subscribe(ids.back());
    const json r = submit_tokens(p, ids.back(), 5 + i, max_tokens);
    BOOST_REQUIRE_MESSAGE(r["ok"] == true, r.dump());
    prompt_total += 5 + i;
  }

  // Scrape while they run: gauges parse, and the work in flight shows at least once.
  double max_in_flight = 0.0, last_generated = 0.0;
  for (int i = 0; i < 200; ++i) {
    const samples s = scrape(http);
    const double running = at(s, "conveyor_num_requests_running"), waiting = at(s, "conveyor_num_requests_waiting");
    const double kv = at(s, "conveyor_kv_cache_usage_perc");
    BOOST_TEST((kv >= 0.0 && kv <= 1.0));
    BOOST_TEST(running <= 2.0);
    const double generated = at(s, "conveyor_generation_tokens_total");
    BOOST_TEST(generated >= last_generated);  // a counter never goes back
    last_generated = generated;
    max_in_flight = std::max(max_in_flight, running + waiting);
    if (running + waiting == 0.0 && generated == n * max_tokens) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // pacing, not synchronisation
  }
  BOOST_TEST(max_in_flight > 0.0);
  BOOST_TEST_MESSAGE("most jobs in flight at a scrape: " << max_in_flight);

  for (const auto& id : ids) {
    const auto events = p.collect(id, std::chrono::seconds(30));
    BOOST_REQUIRE(!events.empty());
    BOOST_TEST(events.back()["kind"] == "done");
    BOOST_TEST(events.back()["finish_reason"] == "length");
  }

  // Every done event has been published, so each job is counted (it is counted before).
  const samples s = scrape(http);
  BOOST_TEST(at(s, "conveyor_prompt_tokens_total") == static_cast<double>(prompt_total));
  BOOST_TEST(at(s, "conveyor_generation_tokens_total") == static_cast<double>(n * max_tokens));
  BOOST_TEST(at(s, "conveyor_num_requests_running") == 0.0);
  BOOST_TEST(at(s, "conveyor_num_requests_waiting") == 0.0);
  double finished = 0.0;
  for (const char* r : {"stop", "length", "cancelled", "deadline"})
    finished += at(s, std::string("conveyor_request_success_total{finished_reason=\"") + r + "\"}");
  BOOST_TEST(finished == n);
  BOOST_TEST(at(s, "conveyor_request_success_total{finished_reason=\"length\"}") == n);
  BOOST_TEST(at(s, "conveyor_request_rejected_total{code=\"bad_request\"}") == bad);
  BOOST_TEST(at(s, "conveyor_request_failed_total") == 0.0);
  check_histograms(s);
  for (const auto& h : kHistograms) {
    const double expected = h == "inter_token_latency_seconds" ? n * max_tokens - n : n;
    BOOST_TEST(at(s, "conveyor_" + h + "_count") == expected, h << ": " << at(s, "conveyor_" + h + "_count") << " != " << expected);
    BOOST_TEST(at(s, "conveyor_" + h + "_sum") > 0.0, h);
  }

  // The stats op: the same numbers.
  const json st = p.request({{"op", "stats"}});
  BOOST_REQUIRE_MESSAGE(st["ok"] == true, st.dump());
  BOOST_TEST(st["prompt_tokens_total"].get<double>() == at(s, "conveyor_prompt_tokens_total"));
  BOOST_TEST(st["completion_tokens_total"].get<double>() == at(s, "conveyor_generation_tokens_total"));
  BOOST_TEST(st["preemptions_total"].get<double>() == at(s, "conveyor_num_preemptions_total"));
  BOOST_TEST(st["jobs_failed"].get<double>() == at(s, "conveyor_request_failed_total"));
  BOOST_TEST(st["queued"].get<double>() == at(s, "conveyor_num_requests_waiting"));
  BOOST_TEST(st["running"].get<double>() == at(s, "conveyor_num_requests_running"));
  BOOST_TEST(st["rejected"].size() == 7u);
  for (const auto& [code, v] : st["rejected"].items())
    BOOST_TEST(v.get<double>() == at(s, "conveyor_request_rejected_total{code=\"" + code + "\"}"), code);
  BOOST_TEST(st["finished"].size() == 4u);
  for (const auto& [reason, v] : st["finished"].items())
    BOOST_TEST(v.get<double>() == at(s, "conveyor_request_success_total{finished_reason=\"" + reason + "\"}"), reason);
  BOOST_TEST(st["histograms"].size() == kHistograms.size());
  for (const auto& h : kHistograms) {
    BOOST_TEST(st["histograms"][h]["count"].get<double>() == at(s, "conveyor_" + h + "_count"), h);
    BOOST_TEST(st["histograms"][h]["sum"].get<double>() == at(s, "conveyor_" + h + "_sum"), h);
  }
}

BOOST_AUTO_TEST_CASE(stats_counts_prompt_tokens_served_from_the_prefix_cache) {
  server srv("null");
  producer p(*srv.rt);
  int64_t cached = 0;
  for (const std::string id : {"pc-1", "pc-2", "pc-3"}) {  // the same 40-token prompt: 2 full blocks reusable
    p.subscribe(id);
    BOOST_REQUIRE(submit_tokens(p, id, 40, 4)["ok"] == true);
    const auto events = p.collect(id, std::chrono::seconds(10));
    BOOST_REQUIRE(!events.empty());
    BOOST_REQUIRE(events.back()["kind"] == "done");
    cached += events.back()["usage"]["cached_tokens"].get<int64_t>();
  }
  BOOST_TEST(cached == 2 * 32);
  const json st = p.request({{"op", "stats"}});
  BOOST_TEST(st["cached_tokens_total"].get<int64_t>() == cached);
}

BOOST_AUTO_TEST_CASE(off_by_default_and_404_elsewhere) {
  server off("null");
  BOOST_TEST(off.rt->metrics_port() == -1);
  BOOST_TEST(off.rt->metrics_url().empty());
  server on("null", [](serve::runtime_options& o) { o.metrics_port = 0; });
  httplib::Client http("127.0.0.1", on.rt->metrics_port());
  auto res = http.Get("/");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status == 404);
  res = http.Post("/metrics", "", "text/plain");
  BOOST_REQUIRE(res);
  BOOST_TEST(res->status != 200);
}

BOOST_AUTO_TEST_CASE(a_taken_port_is_a_clear_error) {
  server first("null", [](serve::runtime_options& o) { o.metrics_port = 0; });
  const int port = first.rt->metrics_port();
  try {
    server second("null", [port](serve::runtime_options& o) { o.metrics_port = port; });
    BOOST_FAIL("a second server bound metrics port " << port);
  } catch (const transport::bind_error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find(std::to_string(port)) != std::string::npos, what);
    BOOST_TEST(what.find("--metrics-port") != std::string::npos, what);
  }
  // `conveyor serve` says the same in one line and exits with 2.
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tiny = dir / ("conveyor-metrics-" + std::to_string(::getpid()) + ".gguf");
  const std::string out = dir / ("conveyor-metrics-" + std::to_string(::getpid()) + ".txt");
  model::write_tiny_llama(tiny, model::tiny_config_a());
  for (const std::string& flag : {"--metrics-port " + std::to_string(port), std::string("--metrics-port 70000")}) {
    const std::string cmd = std::string(CONVEYOR_BINARY_DIR) + "/conveyor serve --model " + tiny + " " + flag +
                            " --router tcp://127.0.0.1:* --pub tcp://127.0.0.1:* --pull tcp://127.0.0.1:* >" + out + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(out);
    const std::string output(std::istreambuf_iterator<char>(in), {});
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 2), flag << ": " << output);
    BOOST_TEST(output.find("metrics") != std::string::npos, output);
  }
  std::filesystem::remove(tiny);
  std::filesystem::remove(out);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
