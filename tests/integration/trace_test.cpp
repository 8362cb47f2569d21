// The iteration trace end to end: a server with trace_path set runs jobs of known lengths, and
// the file accounts for every token (prompt chunks sum to the uncached prompt, decodes to
// completion_tokens - 1, one sample per output token) within the step budgets; the file is
// complete a second after the last step, before shutdown; `conveyor trace` draws it, and bad
// files and unwritable --trace paths are refused with exit code 2.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "server_fixture.hpp"

namespace conveyor::testing {
namespace {

struct job_spec {
  std::string id;
  int prompt_len, max_tokens;
  uint32_t prompt_seed;
  bool resubmitted_prompt = false;  // t/f's prompt again, sent once t/f is done: a prefix-cache hit
};

// Prompts longer than the 48-token budget are chunked; max_tokens 1 leaves no decode at all.
const std::vector<job_spec> jobs = {{"t/a", 5, 7, 1},   {"t/b", 40, 12, 2}, {"t/c", 100, 3, 3}, {"t/d", 77, 20, 4},
                                    {"t/e", 13, 1, 5},  {"t/f", 64, 9, 6},  {"t/g", 64, 5, 6, true}};
constexpr int max_num_seqs = 3, max_num_batched_tokens = 48;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("conveyor-trace-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::vector<json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

struct traced_run {
  std::vector<json> lines;              // header, then steps
  std::map<std::string, json> usage;    // job id -> done event's usage
  size_t lines_before_shutdown = 0;
};

// Random token ids from the job's seed: distinct prompts share nothing in the prefix cache.
json submit_tokens(const job_spec& j) {
  std::mt19937 rng(j.prompt_seed);
  std::vector<int> ids(j.prompt_len);
  for (int& t : ids) t = static_cast<int>(100 + rng() % 20000);
  return {{"op", "submit"}, {"id", j.id},           {"prompt_tokens", ids}, {"max_tokens", j.max_tokens},
          {"temperature", 0}, {"ignore_eos", true}, {"min_tokens", j.max_tokens}};
}

traced_run run_traced(const std::string& executor, const std::string& batching, const std::string& path) {
  traced_run r;
  {
    server srv(executor, [&](serve::runtime_options& ro) {
      ro.trace_path = path;
      ro.sched.max_num_seqs = max_num_seqs;
      ro.sched.max_num_batched_tokens = max_num_batched_tokens;
      ro.sched.batching = *parse_batching_mode(batching);
    });
    producer c(*srv.rt);
    for (bool again : {false, true}) {
      for (const auto& j : jobs) {
        if (j.resubmitted_prompt != again) continue;
        c.subscribe(j.id);
        const json a = c.request(submit_tokens(j));
        BOOST_REQUIRE_MESSAGE(a["ok"] == true, a.dump());
      }
      for (const auto& j : jobs) {
        if (j.resubmitted_prompt != again) continue;
        const std::vector<json> events = c.collect(j.id);
        check_stream(events);
        BOOST_REQUIRE(events.back()["kind"] == "done");
        r.usage[j.id] = events.back()["usage"];
      }
    }
    // Idle now: the flusher writes at least once a second, so everything is on disk already.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    r.lines_before_shutdown = read_lines(path).size();
  }
  r.lines = read_lines(path);
  return r;
}

void check_trace(const traced_run& r, const std::string& batching, int num_kv_blocks) {
  BOOST_REQUIRE(r.lines.size() >= 2u);
  BOOST_TEST(r.lines_before_shutdown == r.lines.size());
  const json& h = r.lines.front();
  BOOST_TEST(h["format"] == "conveyor-trace");
  BOOST_TEST(h["version"] == 1);
  BOOST_TEST(h["batching"] == batching);
  BOOST_TEST(h["max_num_seqs"] == max_num_seqs);
  BOOST_TEST(h["max_num_batched_tokens"] == max_num_batched_tokens);
  BOOST_TEST(h["num_kv_blocks"] == num_kv_blocks);
  BOOST_TEST(h["block_size"] == 16);
  BOOST_TEST(h["model"] == "smollm2");

  struct tally {
    int prompt = 0, decodes = 0, samples = 0;
    bool decoded = false, prompt_after_decode = false, decode_not_one = false;
  };
  std::map<std::string, tally> per_job;
  double last_start = -1;
  for (size_t i = 1; i < r.lines.size(); ++i) {
    const json& s = r.lines[i];
    BOOST_TEST_CONTEXT("step line " << i << ": " << s.dump()) {
      BOOST_TEST(s["step"] == i);  // the engine numbers its steps from 1, none skipped
      BOOST_TEST(s["start_s"].get<double>() >= last_start);
      BOOST_TEST(s["duration_ms"].get<double>() >= 0.0);
      last_start = s["start_s"].get<double>();
      int tokens = 0;
      for (const json& e : s["seqs"]) {
        tally& t = per_job[e["job"].get<std::string>()];
        const int n = e["n"];
        tokens += n;
        BOOST_TEST(n >= 1);
        if (e["kind"] == "prompt") {
          t.prompt += n;
          t.prompt_after_decode |= t.decoded;
        } else {
          BOOST_TEST(e["kind"] == "decode");
          ++t.decodes;
          t.decoded = true;
          t.decode_not_one |= n != 1;
        }
        t.samples += e["sample"].get<bool>();
      }
      BOOST_TEST(tokens <= max_num_batched_tokens);
      BOOST_TEST(s["seqs"].size() <= size_t{max_num_seqs});
      BOOST_TEST(s["running"].get<int>() <= max_num_seqs);
      BOOST_TEST(s["kv_blocks_used"].get<int>() > 0);
      BOOST_TEST(s["kv_blocks_used"].get<int>() <= num_kv_blocks);
      BOOST_TEST(s["waiting"].get<int>() >= 0);
      BOOST_TEST(s["preemptions"] == 0);
      BOOST_TEST(s["preemptions_total"] == 0);
    }
  }
  BOOST_TEST(per_job.size() == jobs.size());
  for (const auto& j : jobs) {
    BOOST_TEST_CONTEXT("job " << j.id) {
      const json& u = r.usage.at(j.id);
      const tally& t = per_job[j.id];
      BOOST_TEST(u["prompt_tokens"] == j.prompt_len);
      BOOST_TEST(u["completion_tokens"] == j.max_tokens);
      // Every prompt token not served by the prefix cache is computed once, in prompt chunks.
      BOOST_TEST(t.prompt + u["cached_tokens"].get<int>() == j.prompt_len);
      if (j.resubmitted_prompt) BOOST_TEST(u["cached_tokens"].get<int>() > 0);
      // The last prompt chunk samples output token 1; each decode feeds back the newest token
      // and samples the next; the last output token is never fed back: completion - 1 decodes.
      BOOST_TEST(t.decodes == j.max_tokens - 1);
      BOOST_TEST(t.samples == j.max_tokens);
      BOOST_TEST(!t.prompt_after_decode);
      BOOST_TEST(!t.decode_not_one);
    }
  }
}

struct run_result {
  int code = -1;
  std::string output;
};

run_result run_conveyor(const std::string& args) {
  const std::string out = temp_path("cli-output.txt");
  const std::string cmd = std::string(CONVEYOR_BINARY_DIR) + "/conveyor " + args + " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(out);
  run_result r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), std::string(std::istreambuf_iterator<char>(in), {})};
  std::filesystem::remove(out);
  return r;
}

void expect_error(const std::string& args, const std::string& needle) {
  BOOST_TEST_CONTEXT("conveyor " << args) {
    const run_result r = run_conveyor(args);
    BOOST_TEST(r.code == 2, "exit code " << r.code << ", output: " << r.output);
    BOOST_TEST(r.output.find(needle) != std::string::npos, "expected '" << needle << "' in: " << r.output);
    BOOST_TEST(std::count(r.output.begin(), r.output.end(), '\n') == 1, "not a one-line error: " << r.output);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

} // namespace

BOOST_AUTO_TEST_SUITE(iteration_trace)

BOOST_AUTO_TEST_CASE(null_executor_continuous_trace_accounts_for_every_token) {
  const std::string path = temp_path("null-continuous.jsonl");
  check_trace(run_traced("null", "continuous", path), "continuous", 1024);
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_CASE(null_executor_static_trace_accounts_for_every_token) {
  const std::string path = temp_path("null-static.jsonl");
  check_trace(run_traced("null", "static", path), "static", 1024);
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_CASE(cpu_executor_trace_accounts_for_every_token) {
  const std::string path = temp_path("cpu-continuous.jsonl");
  check_trace(run_traced("cpu", "continuous", path), "continuous", 512);
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_CASE(conveyor_trace_draws_a_served_trace) {
  const std::string path = temp_path("drawn.jsonl"), svg_path = temp_path("drawn.svg");
  const traced_run r = run_traced("null", "continuous", path);
  const run_result out = run_conveyor("trace " + path + " -o " + svg_path + " --width 900");
  BOOST_TEST(out.code == 0, out.output);
  const std::string svg = slurp(svg_path);
  BOOST_TEST(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900", 0) == 0);
  BOOST_TEST(svg.find("continuous batching: " + std::to_string(r.lines.size() - 1) + " steps") != std::string::npos);
  for (const auto& j : jobs) {
    BOOST_TEST_CONTEXT("job " << j.id) {
      BOOST_TEST(svg.find("<title>" + j.id + " prompt, step") != std::string::npos);
      if (j.max_tokens > 1) BOOST_TEST(svg.find("<title>" + j.id + " decode, step") != std::string::npos);
    }
  }
  BOOST_TEST(svg.find("fill=\"url(#h") != std::string::npos);  // hatched prompt chunks
  BOOST_TEST(svg.find(">waiting</text>") != std::string::npos);
  BOOST_TEST(svg.find(">KV used</text>") != std::string::npos);
  BOOST_TEST(svg.find(">decode token</text>") != std::string::npos);
  BOOST_TEST(svg.find("</svg>") != std::string::npos);

  // A window: --from 3 --steps 2 draws steps 3 and 4 only.
  BOOST_TEST(run_conveyor("trace " + path + " -o " + svg_path + " --from 3 --steps 2").code == 0);
  BOOST_TEST(slurp(svg_path).find("2 steps (3-4 of ") != std::string::npos);
  std::filesystem::remove(path);
  std::filesystem::remove(svg_path);
}

BOOST_AUTO_TEST_CASE(conveyor_trace_refuses_bad_files_with_exit_code_2) {
  const std::string out = temp_path("bad.svg");
  expect_error("trace /nonexistent/trace.jsonl -o " + out, "/nonexistent/trace.jsonl: cannot open");
  const std::string text = temp_path("notes.txt");
  std::ofstream(text) << "this is not a trace\n";
  expect_error("trace " + text + " -o " + out, "not a conveyor trace");
  const std::string v2 = temp_path("v2.jsonl");
  std::ofstream(v2) << R"({"format":"conveyor-trace","version":2,"batching":"static"})" << "\n";
  expect_error("trace " + v2 + " -o " + out, "trace format version 2; this conveyor reads version 1");
  const std::string bad_line = temp_path("bad-line.jsonl");
  std::ofstream(bad_line) << R"({"format":"conveyor-trace","version":1,"batching":"static","max_num_seqs":1,)"
                          << R"("max_num_batched_tokens":8,"num_kv_blocks":8,"block_size":16,"model":"m"})" << "\n"
                          << R"({"step":1})" << "\n{}\n";
  expect_error("trace " + bad_line + " -o " + out, ":2: bad step line");
  BOOST_TEST(!std::filesystem::exists(out));
  for (const auto& p : {text, v2, bad_line}) std::filesystem::remove(p);
}

BOOST_AUTO_TEST_CASE(serve_refuses_an_unwritable_trace_path_with_exit_code_2) {
  expect_error("serve --model smollm2 --device null --trace /nonexistent/dir/t.jsonl --router tcp://127.0.0.1:* "
               "--pub tcp://127.0.0.1:* --pull tcp://127.0.0.1:*",
               "--trace /nonexistent/dir/t.jsonl: cannot open for writing: No such file or directory");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
