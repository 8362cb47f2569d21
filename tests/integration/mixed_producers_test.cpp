// Four producers at once, two in C++ and two in Python (tests/integration/py_producer.py, run
// with the project's .venv): 64 jobs, every stream complete and in order, greedy text equal to
// the executor alone.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "server_fixture.hpp"

namespace conveyor::testing {
namespace {

const char* const kPrompts[] = {"The capital of France is", "def add(a, b):", "1, 2, 3, 4,", "Once upon a time",
                                "Le chat est", "The best way to learn", "Water boils at", "Dear diary,"};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Runs one Python producer; returns its JSON lines.
std::vector<json> run_python_producer(const serve::runtime& rt, const std::string& prefix, int jobs) {
  const std::string root = std::filesystem::path(CONVEYOR_TEST_DATA).parent_path().parent_path().string();
  std::string cmd = "PYTHONPATH=" + root + "/clients/python " + root + "/.venv/bin/python " + root +
                    "/tests/integration/py_producer.py " + rt.router_endpoint() + " " + rt.pub_endpoint() + " " + prefix + " 12";
  for (int j = 0; j < jobs; ++j) cmd += " " + shell_quote(kPrompts[j % 8]);
  std::vector<json> out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[1 << 16];
  std::string buf;
  while (std::fgets(line, sizeof line, p)) {
    buf += line;
    if (!buf.empty() && buf.back() == '\n') {
      out.push_back(json::parse(buf));
      buf.clear();
    }
  }
  ::pclose(p);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(mixed_producers)

BOOST_AUTO_TEST_CASE(two_cpp_and_two_python_producers_share_the_server) {
  const std::string root = std::filesystem::path(CONVEYOR_TEST_DATA).parent_path().parent_path().string();
  BOOST_REQUIRE_MESSAGE(std::filesystem::exists(root + "/.venv/bin/python"), "no .venv; HINT: run ./setup.sh");
  server srv;
  std::map<std::string, std::string> want;  // prompt -> text, from a lone greedy run through the server
  {
    producer solo(*srv.rt);
    for (int k = 0; k < 8; ++k) {
      const std::string id = "solo/" + std::to_string(k);
      solo.subscribe(id);
      BOOST_REQUIRE(solo.request({{"op", "submit"}, {"id", id}, {"prompt", kPrompts[k]}, {"max_tokens", 12}, {"temperature", 0}})["ok"] == true);
      want[kPrompts[k]] = solo.collect(id).back()["text"];
    }
  }
  std::vector<std::vector<json>> cpp_events(2), py_results(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] { py_results[p] = run_python_producer(*srv.rt, "py" + std::to_string(p), 16); });
    threads.emplace_back([&, p] {
      producer c(*srv.rt);
      std::vector<std::string> ids;
      for (int j = 0; j < 16; ++j) {
        ids.push_back("cpp" + std::to_string(p) + "/" + std::to_string(j));
        c.subscribe(ids.back());
        c.request({{"op", "submit"}, {"id", ids.back()}, {"prompt", kPrompts[j % 8]}, {"max_tokens", 12}, {"temperature", 0}});
      }
      for (int j = 0; j < 16; ++j) cpp_events[p].push_back({{"prompt", kPrompts[j % 8]}, {"events", c.collect(ids[j])}});
    });
  }
  for (auto& t : threads) t.join();
  int checked = 0;
  for (const auto& group : {cpp_events[0], cpp_events[1], py_results[0], py_results[1]}) {
    BOOST_TEST(group.size() == 16u);
    for (const auto& r : group) {
      const auto events = r["events"].get<std::vector<json>>();
      BOOST_TEST_CONTEXT("prompt " << r["prompt"]) {
        BOOST_TEST(check_stream(events) == want[r["prompt"].get<std::string>()]);
        ++checked;
      }
    }
  }
  BOOST_TEST(checked == 64);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
