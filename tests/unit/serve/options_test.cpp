// serve_options: the flags and the TOML config merged (the command line wins), the settings'
// checks, and what they derive for the runtime and the executor.
#include <boost/test/unit_test.hpp>

#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "serve/options.hpp"
#include "serve/spec_options.hpp"

namespace conveyor::testing {
namespace {

using serve::serve_options;

// Parses `args` (after "serve") with `toml` as the --config file; returns apply_config's verdict.
std::string parse(serve_options& o, std::vector<std::string> args, const std::string& toml = "") {
  static int n = 0;
  const auto path = std::filesystem::temp_directory_path() / ("conveyor_serve_options_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".toml");
  if (!toml.empty()) {
    std::ofstream(path) << toml;
    args.push_back("--config");
    args.push_back(path.string());
  }
  CLI::App app;
  o.add_flags(app);
  std::reverse(args.begin(), args.end());  // CLI11 takes them reversed
  app.parse(args);
  std::string verdict = o.apply_config(app);
  std::filesystem::remove(path);
  return verdict;
}

} // namespace

BOOST_AUTO_TEST_SUITE(serve_options_rules)

BOOST_AUTO_TEST_CASE(the_config_fills_what_the_command_line_left) {
  serve_options o;
  const std::string err = parse(o, {"--max-num-seqs", "32"},
                                "max_num_seqs = 8\nmax-num-batched-tokens = 4096\ndevice = \"null\"\nenable_prefix_caching = false\n"
                                "kv_watermark = 0.05\napi_key = [\"a\", \"b\"]\n");
  BOOST_TEST(err == "");
  BOOST_TEST(o.max_num_seqs == 32);  // the flag wins
  BOOST_TEST(o.max_num_batched_tokens == 4096);
  BOOST_TEST(o.device == "null");
  BOOST_TEST(!o.enable_prefix_caching);
  BOOST_TEST(o.kv_watermark == 0.05);
  BOOST_TEST((o.api_key == std::vector<std::string>{"a", "b"}));
}

BOOST_AUTO_TEST_CASE(a_bad_config_is_named) {
  struct row {
    const char* toml;
    const char* says;
  };
  for (const row& r : {row{"no_such_setting = 1\n", "unknown setting 'no_such_setting'"}, row{"max_num_seqs = [1, 2]\n", "list of strings"},
                       row{"device = \"tpu\"\n", "setting 'device'"}, row{"max_num_seqs = \n", "not valid TOML"},
                       row{"max_num_seqs = { a = 1 }\n", "string, number or boolean"}}) {
    serve_options o;
    const std::string err = parse(o, {}, r.toml);
    BOOST_TEST(err.find(r.says) != std::string::npos, r.toml << " -> " << err);
  }
}

BOOST_AUTO_TEST_CASE(settings_out_of_range_are_refused) {
  struct row {
    const char* name;
    void (*set)(serve_options&);
    const char* says;
  };
  const std::vector<row> rows = {
      {"max_num_seqs 0", [](serve_options& o) { o.max_num_seqs = 0; }, "max_num_seqs"},
      {"block_size 0", [](serve_options& o) { o.block_size = 0; }, "block_size"},
      {"kv_watermark 1", [](serve_options& o) { o.kv_watermark = 1.0; }, "kv_watermark"},
      {"batching", [](serve_options& o) { o.batching = "greedy"; }, "batching"},
      {"cpu_math", [](serve_options& o) { o.cpu_math = "fp8"; }, "cpu_math"},
      {"CURVE half given", [](serve_options& o) { o.curve_secret_key = "x.key"; }, "go together"},
      {"two endpoints, one port", [](serve_options& o) { o.http_port = 5555; }, "--router and --http-port both name port 5555"},
      {"sim cost model", [](serve_options& o) { o.sim_cost_model = "tpu"; }, "sim_cost_model"},
      {"reasoning parser", [](serve_options& o) { o.reasoning_parser = "granite"; }, "reasoning_parser must be qwen3 or deepseek_r1"},
      {"chat template", [](serve_options& o) { o.chat_template = "/nonexistent/t.jinja"; }, "chat_template: cannot read '/nonexistent/t.jinja'"},
  };
  BOOST_TEST(serve_options{}.validate() == "");
  for (const auto& r : rows) {
    serve_options o;
    r.set(o);
    BOOST_TEST(o.validate().find(r.says) != std::string::npos, r.name << ": " << o.validate());
  }
}

BOOST_AUTO_TEST_CASE(nats_means_no_local_journal) {
  serve_options o;
  o.state_dir = "/tmp/conveyor-state";
  BOOST_TEST(o.journal_file() == "/tmp/conveyor-state/journal.db");
  o.nats.url = "nats://127.0.0.1:4222";
  BOOST_TEST(o.journal_file() == "");  // JetStream keeps the fleet's jobs
  o.nats.url.clear();
  o.journal = false;
  BOOST_TEST(o.journal_file() == "");
}

BOOST_AUTO_TEST_CASE(what_the_runtime_gets) {
  serve_options o;
  executor_info info;
  info.num_kv_blocks = 1000;
  info.block_size = 16;
  info.max_model_len = 8192;
  serve::runtime_options r = o.runtime(info, "/models/tiny.gguf");
  BOOST_TEST(r.sched.max_model_len == default_max_model_len(8192, 16000));  // a quarter of the pool, at most the context
  BOOST_TEST(r.model_name == "tiny.gguf");
  BOOST_TEST(r.worker_threads >= 1);
  o.max_model_len = 2048;
  o.served_model_name = "m";
  o.worker_threads = 3;
  r = o.runtime(info, "/models/tiny.gguf");
  BOOST_TEST(r.sched.max_model_len == 2048);
  BOOST_TEST(r.model_name == "m");
  BOOST_TEST(r.worker_threads == 3);
  const serve::executor_settings es = o.executor();
  BOOST_TEST(es.max_model_len == 2048);
  BOOST_TEST(es.block_size == o.block_size);
}

// The CUDA executor verifies drafts (batch-invariant) only when --speculative-config asks for
// speculation: then up to its num_speculative_tokens a step.
BOOST_AUTO_TEST_CASE(an_explicit_speculative_config_sizes_the_executors_drafts) {
  serve_options o;
  BOOST_TEST(o.executor().max_drafts == 0);  // the default: the CPU drafts, CUDA does not verify
  o.speculative_config = R"({"method": "ngram", "num_speculative_tokens": 5})";
  BOOST_TEST(o.executor().max_drafts == 5);
  o.speculative_config = R"({"method": "ngram"})";
  BOOST_TEST(o.executor().max_drafts == serve::default_speculative_config().num_speculative_tokens);
  o.speculative_config = R"({"method": "none"})";
  BOOST_TEST(o.executor().max_drafts == 0);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
