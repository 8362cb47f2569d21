// Every `conveyor serve` setting: one field per flag, the same names in the TOML config
// (vLLM's names where the meaning is the same).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serve/executor_factory.hpp"
#include "serve/runtime.hpp"
#include "transport/nats_config.hpp"

namespace CLI {
class App;
}

namespace conveyor::serve {

struct serve_options {
  std::string model = "smollm2";
  std::string device = "cpu";  ///< cpu | cuda | null (no arithmetic: the runtime's own overhead) | sim (null + step times)
  std::string sim_cost_model = "h100-llama8b";  ///< sim: the step cost preset
  double gpu_memory_utilization = 0.90;  ///< cuda: fraction of GPU memory for weights, activations and KV
  std::string router = "tcp://127.0.0.1:5555";
  std::string pub = "tcp://127.0.0.1:5556";
  std::string pull = "tcp://127.0.0.1:5557";
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_model_len = 0;  ///< 0: the model's context, at most a quarter of the KV pool (default_max_model_len)
  int32_t block_size = 16;
  int64_t kv_cache_bytes = 0;  ///< 0: sized from the model and the machine (auto_kv_cache_bytes)
  int32_t num_kv_blocks = 0;  ///< > 0 overrides kv_cache_bytes
  bool enable_prefix_caching = true;
  bool async_scheduling = true;       ///< plan step N+1 while step N runs (CUDA executor)
  std::string scheduling_policy = "fcfs";
  std::string batching = "continuous";
  double kv_watermark = 0.01;
  int32_t max_num_queued_reqs = 0;    ///< 0: unbounded
  int64_t max_num_queued_tokens = 0;  ///< 0: unbounded
  double drain_timeout_s = 30.0;
  int32_t threads = 0;              ///< cpu: compute threads of a step; 0: every core
  std::string cpu_math = "fast";    ///< cpu: fast (8-bit activations, integer dots) | exact (f32)
  int32_t worker_threads = 0;  ///< CAF workers; 0: the cores minus one (at least 1)
  int32_t metrics_port = -1;                ///< Prometheus /metrics: -1 off, 0 any free port
  std::string metrics_host = "127.0.0.1";  ///< address /metrics listens on
  int32_t http_port = -1;                  ///< OpenAI-compatible HTTP: -1 off, 0 any free port
  std::string http_host = "127.0.0.1";     ///< address the HTTP intake listens on
  int32_t http_threads = 2;                ///< HTTP I/O threads (event loop; connections are not bound to threads)
  double http_request_timeout_s = 600.0;   ///< a whole (non-streamed) HTTP answer waits at most this long
  int64_t http_max_body = 8 << 20;         ///< largest HTTP request body in bytes
  std::vector<std::string> api_key;        ///< keys HTTP clients send as Authorization: Bearer (repeatable)
  std::string api_key_file;                ///< more keys, one a line; re-read on SIGHUP
  bool allow_unauthenticated_http = false; ///< let a non-loopback HTTP bind run without keys while CURVE is on
  std::string served_model_name;           ///< the model's name in HTTP (/v1/models); empty: the file's name
  std::string reasoning_parser;            ///< chat answers' thinking as reasoning_content: qwen3, deepseek_r1 or "" (none)
  std::string chat_template;               ///< a Jinja chat template file used instead of the model's; empty: the model's
  std::string trace;  ///< iteration trace file (JSON Lines, `conveyor trace` draws it); empty: off
  std::string curve_secret_key;  ///< the server's NAME.key from `conveyor keygen`; empty: CURVE off
  std::string authorized_keys;   ///< client public keys allowed to connect, one per line
  bool journal = true;        ///< the job journal (accepted jobs survive a crash and resume)
  std::string state_dir;      ///< where journal.db lives; empty: journal::default_state_dir()
  std::string journal_sync = "process";  ///< process | power (fsync per commit)
  int32_t poison_after = 2;   ///< a job running in this many consecutive crashes ends with an error (0: never)
  double retention_s = 300.0; ///< seconds a finished job stays fetchable (memory and journal)
  transport::nats_config nats;  ///< NATS JetStream intake and events (url empty: off)
  /// vLLM's --speculative-config JSON (serve/spec_options.hpp); empty: default_speculative_config().
  std::string speculative_config;
  std::string config_path;

  /// The journal file these settings name ("" when the journal is off: --no-journal, or NATS,
  /// where JetStream keeps the fleet's jobs and a restarted replica gets its unfinished jobs back
  /// as redeliveries like any other replica).
  std::string journal_file() const;
  /// What sizes the executor.
  executor_settings executor() const;

  /// Applies the TOML file named by --config to every setting not given on the command line
  /// (keys are the flag names with _ or -). Returns "" or what is wrong with the file.
  std::string apply_config(CLI::App& cmd);

  /// Adds every flag (and --config) to `cmd`.
  void add_flags(CLI::App& cmd);
  void add_nats_flags(CLI::App& cmd);
  /// "" when the settings are usable, else what is wrong and how to fix it.
  std::string validate() const;
  /// "" or which two flags name the same TCP port.
  std::string port_clash() const;
  /// What the HTTP and metrics binds need before start-up: "" when fine, else why they are refused
  /// (a non-loopback HTTP bind without keys while CURVE is on). `warnings` gets one line per
  /// non-loopback bind without keys.
  std::string check_http_security(bool keys_set, std::vector<std::string>& warnings) const;
  /// The runtime's options, with max_model_len resolved against the executor. Reads the CURVE
  /// key files when given (throws transport::curve_error).
  runtime_options runtime(const executor_info& info, const std::string& model_path) const;
};

} // namespace conveyor::serve
