// The front door's findings, each as a regression test: a taken port ends start-up (exit 2, one
// line, within 5 s); bad settings are refused at start-up; a frame of any size never costs its
// size in memory; a multi-frame ROUTER message is answered; PULL rejections are counted and never
// reach a known job's topic; every published string is UTF-8; one job cannot hold the KV pool.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <zmq_addon.hpp>

#include "model/text/unicode_bytes.hpp"
#include "server_fixture.hpp"

namespace conveyor::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string conveyor_bin() { return std::string(CONVEYOR_BINARY_DIR) + "/conveyor"; }

struct finished_run {
  int code = -1;
  std::string output;
  double seconds = 0.0;
};

// Runs `conveyor serve ARGS` to its end (sent `signal` after `limit_s`), with its output.
finished_run run_serve(const std::string& args, int limit_s = 20, const char* signal = "KILL") {
  const std::string out = (fs::temp_directory_path() / ("conveyor-front-" + std::to_string(::getpid()) + ".txt")).string();
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(
      ("timeout -s " + std::string(signal) + " " + std::to_string(limit_s) + " " + conveyor_bin() + " serve " + args + " >" + out + " 2>&1")
          .c_str());
  finished_run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(out);
  r.output.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(out);
  return r;
}

void expect_startup_error(const std::string& args, const std::string& needle, double within_s) {
  BOOST_TEST_CONTEXT("conveyor serve " << args) {
    const finished_run r = run_serve(args);
    BOOST_TEST(r.code == 2, "exit code " << r.code << ", output: " << r.output);
    BOOST_TEST(r.output.find(needle) != std::string::npos, "expected '" << needle << "' in: " << r.output);
    BOOST_TEST(std::count(r.output.begin(), r.output.end(), '\n') <= 2, "not a one-line error: " << r.output);
    BOOST_TEST(r.seconds < within_s, "took " << r.seconds << " s");
  }
}

// A port someone else holds: a socket bound to a free one, kept open.
struct taken_port {
  zmq::context_t ctx;
  zmq::socket_t sock{ctx, zmq::socket_type::router};
  std::string endpoint;
  taken_port() {
    sock.set(zmq::sockopt::linger, 0);
    sock.bind("tcp://127.0.0.1:*");
    endpoint = sock.get(zmq::sockopt::last_endpoint);
  }
};

long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

json ask(zmq::socket_t& dealer, const json& msg) {
  const auto bytes = json::to_msgpack(msg);
  dealer.send(zmq::buffer(bytes), zmq::send_flags::none);
  zmq::message_t reply;
  if (!dealer.recv(reply)) return json();
  return json::from_msgpack(std::string(static_cast<const char*>(reply.data()), reply.size()));
}

} // namespace

BOOST_AUTO_TEST_SUITE(front_door)

BOOST_AUTO_TEST_CASE(a_taken_port_ends_start_up_with_exit_2_within_5_s) {
  taken_port held;
  const std::string free = "'tcp://127.0.0.1:*'";
  expect_startup_error("--device null --router " + held.endpoint + " --pub " + free + " --pull " + free, "cannot bind --router", 5.0);
  expect_startup_error("--device null --pull " + held.endpoint + " --pub " + free + " --router " + free, "cannot bind --pull", 5.0);
  expect_startup_error("--device null --pub " + held.endpoint + " --router " + free + " --pull " + free, "cannot bind --pub", 5.0);
}

BOOST_AUTO_TEST_CASE(non_finite_or_absurd_settings_are_refused_at_start_up) {
  const std::string eps = "--router 'tcp://127.0.0.1:*' --pub 'tcp://127.0.0.1:*' --pull 'tcp://127.0.0.1:*' ";
  expect_startup_error(eps + "--device null --drain-timeout nan", "drain_timeout", 5.0);
  expect_startup_error(eps + "--device null --drain-timeout 1e300", "drain_timeout", 5.0);
  expect_startup_error(eps + "--device null --kv-watermark inf", "kv_watermark", 5.0);
  expect_startup_error(eps + "--device null --gpu-memory-utilization nan", "gpu_memory_utilization", 5.0);
  expect_startup_error(eps + "--device null --max-num-seqs 0", "max_num_seqs", 5.0);
  expect_startup_error(eps + "--device cpu --kv-cache-bytes 100000000000000", "lower kv_cache_bytes", 20.0);
  expect_startup_error(eps + "--device cpu --kv-cache-bytes -5", "kv_cache_bytes must be >= 0", 5.0);
  expect_startup_error(eps + "--device cpu --threads -1", "threads must be in 0..1024", 5.0);
  expect_startup_error(eps + "--device cpu --cpu-math fastest", "cpu_math must be fast or exact, not 'fastest'", 5.0);
}

// 256 MiB in one frame: ZeroMQ (ZMQ_MAXMSGSIZE = 2 x the 1 MiB limit) drops the connection
// before reading it, so the server's memory does not grow by the frame's size.
BOOST_AUTO_TEST_CASE(a_huge_frame_is_never_read_into_memory) {
  const fs::path dir = fs::temp_directory_path() / ("conveyor-front-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string router = "ipc://" + (dir / "router").string(), pub = "ipc://" + (dir / "pub").string(),
                    pull = "ipc://" + (dir / "pull").string(), bin = conveyor_bin();
  // Everything the child needs is built before fork(): only exec may run in it (no malloc).
  const char* argv[] = {"conveyor", "serve", "--device", "null", "--router", router.c_str(), "--pub", pub.c_str(),
                        "--pull", pull.c_str(), "--drain-timeout", "0", nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(bin.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  struct reaper {  // the child never outlives the test, whatever fails
    pid_t pid;
    ~reaper() {
      if (pid <= 0) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } guard{pid};
  zmq::context_t ctx;
  auto dealer = [&] {
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    d.set(zmq::sockopt::rcvtimeo, 2000);
    d.connect(router);
    return d;
  };
  zmq::socket_t d = dealer();
  json health;
  for (int i = 0; i < 30 && !health.is_object(); ++i) health = ask(d, {{"op", "health"}});
  BOOST_REQUIRE_MESSAGE(health.is_object(), "the server did not start");
  const long before = rss_kb(pid);
  {
    zmq::socket_t big = dealer();
    std::string frame(256u << 20, '\xc1');
    big.send(zmq::buffer(frame), zmq::send_flags::none);
    zmq::message_t reply;
    BOOST_TEST(!big.recv(reply), "a reply came to a 256 MiB frame");
  }
  BOOST_TEST(ask(d, {{"op", "health"}})["ok"] == true);  // still serving
  const long after = rss_kb(pid);
  BOOST_TEST(after - before < 32 * 1024, "RSS grew from " << before << " kB to " << after << " kB");
  // A frame just over the 1 MiB limit is read and refused.
  std::string over((1u << 20) + 10, '\xc1');
  d.send(zmq::buffer(over), zmq::send_flags::none);
  zmq::message_t reply;
  BOOST_REQUIRE(d.recv(reply));
  const json r = json::from_msgpack(std::string(static_cast<const char*>(reply.data()), reply.size()));
  BOOST_TEST(r["error"]["code"] == "too_long");
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  guard.pid = -1;
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), "status " << status);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_multi_frame_router_message_gets_an_error_reply) {
  server s("null");
  zmq::context_t ctx;
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  d.set(zmq::sockopt::rcvtimeo, 5000);
  d.connect(s.rt->router_endpoint());
  const auto body = json::to_msgpack(json{{"op", "health"}});
  d.send(zmq::buffer(body), zmq::send_flags::sndmore);
  d.send(zmq::buffer(body), zmq::send_flags::none);
  zmq::message_t reply;
  BOOST_REQUIRE_MESSAGE(d.recv(reply), "no reply to a two-frame message");
  const json r = json::from_msgpack(std::string(static_cast<const char*>(reply.data()), reply.size()));
  BOOST_TEST(r["ok"] == false);
  BOOST_TEST(r["error"]["code"] == "bad_request");
  BOOST_TEST(ask(d, {{"op", "health"}})["ok"] == true);  // the next request is answered in order
}

// A stranger PUSHes a broken submit carrying a live job's id: nothing reaches that job's topic
// (before: an error event with seq 0, so its subscribers saw two seq-0 and two terminal events).
BOOST_AUTO_TEST_CASE(a_rejected_push_never_publishes_on_a_known_jobs_topic_and_is_counted) {
  server s("cpu");
  producer p(*s.rt);
  const auto rejected = [&] { return p.request({{"op", "stats"}})["jobs_rejected"].get<int>(); };
  p.subscribe("live-1");
  BOOST_REQUIRE(p.request({{"op", "submit"}, {"id", "live-1"}, {"prompt", "Count to fifty:"}, {"max_tokens", 48},
                           {"temperature", 0}, {"ignore_eos", true}})["ok"] == true);
  p.push({{"op", "submit"}, {"id", "live-1"}, {"prompt", "x"}, {"max_tokens", -5}});  // bad field, live id
  p.push({{"op", "submit"}, {"id", "live-1"}, {"prompt", "x"}});                      // duplicate
  p.push({{"op", "submit"}, {"prompt", "no id"}});                                     // nobody to tell
  const std::vector<json> events = p.collect("live-1");
  check_stream(events);
  for (const auto& e : events) BOOST_TEST(e["kind"] != "error");
  for (int i = 0; i < 100 && rejected() < 3; ++i) std::this_thread::sleep_for(20ms);
  BOOST_TEST(rejected() == 3);
  // After the job ended its id is still known: a broken PUSH names it, nothing is published.
  p.push({{"op", "submit"}, {"id", "live-1"}, {"prompt", 5}});
  const json f = p.request({{"op", "fetch"}, {"id", "live-1"}});
  for (int i = 0; i < 100 && rejected() < 4; ++i) std::this_thread::sleep_for(20ms);
  BOOST_TEST(rejected() == 4);
  BOOST_TEST(p.request({{"op", "fetch"}, {"id", "live-1"}})["events"].size() == f["events"].size());
  // A broken PUSH with an unknown id is told on that id's topic, as protocol.md §3.1 says.
  p.subscribe("stranger");
  p.push({{"op", "submit"}, {"id", "stranger"}, {"prompt", "x"}, {"max_tokens", -5}});
  const std::vector<json> told = p.collect("stranger", 10s);
  BOOST_REQUIRE(told.size() == 1u);
  BOOST_TEST(told[0]["kind"] == "error");
  BOOST_TEST(told[0]["code"] == "bad_request");
}

// A job that ends by max_tokens inside a multi-byte character (about 1 job in 7 for this prompt
// at temperature 1) published its partial bytes before; now every string is UTF-8.
BOOST_AUTO_TEST_CASE(every_published_string_is_utf8) {
  server s("cpu");
  producer p(*s.rt);
  for (int seed = 0; seed < 24; ++seed) {
    const std::string id = "utf8-" + std::to_string(seed);
    p.subscribe(id);
    BOOST_REQUIRE(p.request({{"op", "submit"}, {"id", id}, {"prompt", "é ü 漢字 🙂"}, {"max_tokens", 1},
                             {"temperature", 1.0}, {"seed", seed}})["ok"] == true);
    const std::vector<json> events = p.collect(id);
    const std::string deltas = check_stream(events);
    BOOST_TEST_CONTEXT("seed " << seed) {
      BOOST_TEST(model::is_valid_utf8(deltas));
      BOOST_TEST(events.back()["text"].get<std::string>() == deltas);
      const json f = p.request({{"op", "fetch"}, {"id", id}});
      for (const auto& e : f["events"])
        if (e.contains("text")) BOOST_TEST(model::is_valid_utf8(e["text"].get<std::string>()));
    }
  }
}

// The fairness rule: by default max_model_len is at most a quarter of the KV pool, so a job
// asking for 2^31-1 tokens ends at max_model_len and never holds more than a quarter of the
// blocks while other jobs queue (before: it held 94% and 6,221 jobs waited behind it).
BOOST_AUTO_TEST_CASE(one_job_cannot_hold_the_kv_pool_against_a_queue) {
  // conveyor serve derives it: the null executor's pool is 4096 blocks of 16 tokens.
  const finished_run r =
      run_serve("--device null --router 'tcp://127.0.0.1:*' --pub 'tcp://127.0.0.1:*' --pull 'tcp://127.0.0.1:*' --drain-timeout 0", 3, "TERM");
  BOOST_TEST(r.output.find("max_model_len 16384;") != std::string::npos, r.output);

  const int32_t pool_tokens = 1024 * 16;  // the fixture's null executor
  server s("null", [&](serve::runtime_options& o) { o.sched.max_model_len = default_max_model_len(1 << 20, pool_tokens); });
  producer p(*s.rt);
  p.subscribe("hog");
  BOOST_REQUIRE(p.request({{"op", "submit"}, {"id", "hog"}, {"prompt", "x"}, {"max_tokens", 2147483647},
                           {"ignore_eos", true}})["ok"] == true);
  double most = 0.0;
  for (int i = 0; i < 20; ++i) {
    const std::string id = "small-" + std::to_string(i);
    p.subscribe(id);
    BOOST_REQUIRE(p.request({{"op", "submit"}, {"id", id}, {"prompt", "y"}, {"max_tokens", 8}, {"ignore_eos", true}})["ok"] == true);
    most = std::max(most, p.request({{"op", "stats"}})["kv_usage"].get<double>());
  }
  for (int i = 0; i < 20; ++i) check_stream(p.collect("small-" + std::to_string(i)));
  const std::vector<json> hog = p.collect("hog");
  check_stream(hog);
  BOOST_TEST(hog.back()["finish_reason"] == "length");
  BOOST_TEST(hog.back()["usage"]["prompt_tokens"].get<int>() + hog.back()["usage"]["completion_tokens"].get<int>() == pool_tokens / 4);
  BOOST_TEST(most <= 0.30, "the KV pool was " << most * 100 << "% used");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
