#include "serve/options.hpp"

#include "serve/spec_options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <thread>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "engine/sim/cost_model.hpp"
#include "model/cpu/cpu_cores.hpp"
#include "transport/api_keys.hpp"
#include "transport/reasoning.hpp"

namespace conveyor::serve {

using speculative_config_t = conveyor::speculative_config;

void serve_options::add_flags(CLI::App& cmd) {
  cmd.add_option("--config", config_path, "TOML file with any of these settings (flag names with _ or -); flags win")
      ->check(CLI::ExistingFile);
  cmd.add_option("--model,-m", model, "Model name (smollm2), GGUF file or Hugging Face folder")->capture_default_str();
  cmd.add_option("--device", device,
                 "cpu, cuda, null (fixed token, no arithmetic: measures the runtime itself), or sim (null, but each step "
                 "takes as long as --sim-cost-model says: replicas on one machine behave like GPUs)")
      ->check(CLI::IsMember({"cpu", "cuda", "null", "sim"}))->capture_default_str();
  cmd.add_option("--sim-cost-model,--sim_cost_model", sim_cost_model, "sim: step cost parameters (cpu | h100-llama8b, an estimate)")
      ->capture_default_str();
  cmd.add_option("--gpu-memory-utilization,--gpu_memory_utilization", gpu_memory_utilization,
                 "cuda: fraction of GPU memory for weights, activations and the KV pool")->capture_default_str();
  cmd.add_option("--router", router, "ROUTER endpoint (submit and control ops)")->capture_default_str();
  cmd.add_option("--pub", pub, "PUB endpoint (job event streams, sys/ heartbeat)")->capture_default_str();
  cmd.add_option("--pull", pull, "PULL endpoint (fire-and-forget submits)")->capture_default_str();
  cmd.add_option("--max-num-seqs,--max_num_seqs", max_num_seqs, "Most sequences per step")->capture_default_str();
  cmd.add_option("--max-num-batched-tokens,--max_num_batched_tokens", max_num_batched_tokens, "Token budget per step")->capture_default_str();
  cmd.add_option("--max-model-len,--max_model_len", max_model_len, "Longest prompt + output (0: the model's context, at most a quarter of the KV pool)")->capture_default_str();
  cmd.add_option("--block-size,--block_size", block_size, "Tokens per KV block")->capture_default_str();
  cmd.add_option("--kv-cache-bytes,--kv_cache_bytes", kv_cache_bytes, "Memory for the KV cache (0: room for 4 sequences of max_model_len, at most 10% of RAM)")->capture_default_str();
  cmd.add_option("--threads", threads, "cpu: compute threads (0: every core)")->capture_default_str();
  cmd.add_option("--cpu-math,--cpu_math", cpu_math, "cpu: fast (8-bit activations, integer dot products, as llama.cpp) | exact (f32)")->capture_default_str();
  cmd.add_option("--num-kv-blocks,--num_kv_blocks", num_kv_blocks, "KV blocks (overrides --kv-cache-bytes)")->capture_default_str();
  cmd.add_option("--enable-prefix-caching,--enable_prefix_caching", enable_prefix_caching, "Reuse cached prompt blocks")->capture_default_str();
  cmd.add_option("--scheduling-policy,--scheduling_policy", scheduling_policy, "fcfs | priority")->capture_default_str();
  cmd.add_option("--batching", batching, "continuous | static")->capture_default_str();
  cmd.add_option("--async-scheduling,--async_scheduling", async_scheduling,
                 "Plan the next step while the device runs this one (CUDA; the CPU executor runs steps one at a time)")
      ->capture_default_str();
  cmd.add_option("--speculative-config,--speculative_config", speculative_config,
                 "Speculative decoding as vLLM's JSON: '{\"method\": \"ngram\", \"num_speculative_tokens\": 8, \"prompt_lookup_min\": 1, "
                 "\"prompt_lookup_max\": 5}' or '{\"method\": \"none\"}'. It changes no output, only the speed (default: ngram on "
                 "cpu; on cuda only when given, which makes the CUDA executor batch-invariant)");
  cmd.add_option("--kv-watermark,--kv_watermark", kv_watermark, "Fraction of KV blocks kept free at admission")->capture_default_str();
  cmd.add_option("--max-num-queued-reqs,--max_num_queued_reqs", max_num_queued_reqs, "Queue bound in jobs (0: none)")->capture_default_str();
  cmd.add_option("--max-num-queued-tokens,--max_num_queued_tokens", max_num_queued_tokens, "Queue bound in prompt tokens (0: none)")->capture_default_str();
  cmd.add_option("--drain-timeout,--drain_timeout", drain_timeout_s, "Seconds running jobs get to finish at shutdown")->capture_default_str();
  cmd.add_option("--worker-threads,--worker_threads", worker_threads,
                 "CAF worker threads for the request actors (tokenization, events); 0: the cores minus one, at least 1")
      ->capture_default_str();
  cmd.add_option("--metrics-port,--metrics_port", metrics_port, "Serve Prometheus text at http://HOST:PORT/metrics (-1: off, 0: any free port)")
      ->capture_default_str();
  cmd.add_option("--metrics-host,--metrics_host", metrics_host, "Address the /metrics endpoint listens on")->capture_default_str();
  cmd.add_option("--http-port,--http_port", http_port,
                 "OpenAI-compatible HTTP (/v1/chat/completions, /v1/completions, /v1/models, /health) on this port (-1: off, 0: any free port)")
      ->capture_default_str();
  cmd.add_option("--http-host,--http_host", http_host, "Address the HTTP intake listens on")->capture_default_str();
  cmd.add_option("--api-key,--api_key", api_key,
                 "A key HTTP clients must send as Authorization: Bearer KEY on /v1 and /metrics (repeatable; /health stays open)");
  cmd.add_option("--api-key-file,--api_key_file", api_key_file, "More API keys, one a line (# comments); re-read on SIGHUP");
  cmd.add_flag("--allow-unauthenticated-http,--allow_unauthenticated_http", allow_unauthenticated_http,
               "Serve HTTP on a non-loopback address without API keys even though CURVE locks ZeroMQ");
  cmd.add_option("--http-threads,--http_threads", http_threads,
                 "Threads running the HTTP event loop (connections and waiting requests hold no thread)")
      ->capture_default_str();
  cmd.add_option("--http-request-timeout,--http_request_timeout", http_request_timeout_s,
                 "Seconds a non-streamed HTTP request waits for its job before 504 (a job without a request id is then cancelled)")
      ->capture_default_str();
  cmd.add_option("--http-max-body,--http_max_body", http_max_body, "Largest HTTP request body in bytes (a longer one gets 400)")
      ->capture_default_str();
  cmd.add_option("--served-model-name,--served_model_name", served_model_name,
                 "The model's name in HTTP requests and /v1/models (default: the model file's name)");
  cmd.add_option("--reasoning-parser,--reasoning_parser", reasoning_parser,
                 "HTTP chat answers: the model's <think>...</think> as reasoning_content (qwen3 | deepseek_r1; default: none)");
  cmd.add_option("--chat-template,--chat_template", chat_template,
                 "A Jinja chat template file to render chat requests with instead of the model's own (as llama-server's "
                 "--chat-template-file and vLLM's --chat-template)");
  cmd.add_option("--trace", trace, "Record every step to this file (JSON Lines; draw it with `conveyor trace`)");
  cmd.add_flag("--journal,!--no-journal", journal, "Journal every accepted job and event (SQLite) so a crash loses none; --no-journal: off")
      ->capture_default_str();
  cmd.add_option("--state-dir,--state_dir", state_dir, "Directory of the journal (journal.db); default $XDG_STATE_HOME/conveyor or ~/.local/state/conveyor");
  cmd.add_option("--journal-sync,--journal_sync", journal_sync,
                 "process: a commit survives a crash of the server; power: also power loss (fsync per commit)")
      ->check(CLI::IsMember({"process", "power"}))->capture_default_str();
  cmd.add_option("--poison-after,--poison_after", poison_after,
                 "A job running in this many consecutive crashes ends with an error instead of resuming (0: never)")->capture_default_str();
  cmd.add_option("--retention", retention_s, "Seconds a finished job stays fetchable and known (also in the journal)")->capture_default_str();
  cmd.add_option("--curve-secret-key,--curve_secret_key", curve_secret_key,
                 "CURVE: the server's NAME.key from `conveyor keygen` (encrypts ROUTER, PULL, PUB; needs --authorized-keys)");
  cmd.add_option("--authorized-keys,--authorized_keys", authorized_keys,
                 "CURVE: file of client public keys (NAME.pub lines) allowed to connect (needs --curve-secret-key)");
  add_nats_flags(cmd);
}

void serve_options::add_nats_flags(CLI::App& cmd) {
  auto& n = nats;
  cmd.add_option("--nats", n.url, "NATS server(s) to take jobs from and store events in (nats://HOST:4222[,nats://...]); turns the journal off: JetStream keeps the fleet's jobs");
  cmd.add_option("--nats-creds,--nats_creds", n.creds_file, "NATS: user credentials file (.creds)");
  cmd.add_option("--nats-user,--nats_user", n.user, "NATS: user name");
  cmd.add_option("--nats-password,--nats_password", n.password, "NATS: password");
  cmd.add_option("--nats-token,--nats_token", n.token, "NATS: token");
  cmd.add_option("--nats-stream,--nats_stream", n.jobs_stream, "NATS: the work-queue stream of jobs")->capture_default_str();
  cmd.add_option("--nats-subject,--nats_subject", n.jobs_subject, "NATS: the subject producers publish submit maps on")->capture_default_str();
  cmd.add_option("--nats-consumer,--nats_consumer", n.consumer, "NATS: the durable pull consumer every replica shares")->capture_default_str();
  cmd.add_option("--nats-events-stream,--nats_events_stream", n.events_stream, "NATS: the stream of job events")->capture_default_str();
  cmd.add_option("--nats-events-prefix,--nats_events_prefix", n.events_prefix, "NATS: events go to PREFIX.<job id tokens>")->capture_default_str();
  cmd.add_option("--nats-dead-subject,--nats_dead_subject", n.dead_subject, "NATS: where jobs that are not run go, with the error")->capture_default_str();
  cmd.add_option("--nats-ack-wait,--nats_ack_wait", n.ack_wait_s, "NATS: seconds without an ack or progress before a job is redelivered")->capture_default_str();
  cmd.add_option("--nats-max-deliver,--nats_max_deliver", n.max_deliver, "NATS: the delivery that reaches this count is dead-lettered")->capture_default_str();
  cmd.add_option("--nats-connect-timeout,--nats_connect_timeout", n.connect_timeout_s, "NATS: seconds to wait for the server at start-up")->capture_default_str();
  cmd.add_option("--nats-replicas,--nats_replicas", n.stream_replicas, "NATS: JetStream replicas of the streams created (cluster)")->capture_default_str();
}

std::string serve_options::apply_config(CLI::App& cmd) {
  if (config_path.empty()) return {};
  toml::table table;
  try {
    table = toml::parse_file(config_path);
  } catch (const toml::parse_error& e) {
    return config_path + ": not valid TOML: " + std::string(e.description());
  }
  for (const auto& [key, node] : table) {
    std::string name(key.str());
    std::replace(name.begin(), name.end(), '_', '-');
    CLI::Option* opt = nullptr;
    try {
      opt = cmd.get_option("--" + name);
    } catch (const CLI::OptionNotFound&) {
      return config_path + ": unknown setting '" + std::string(key.str()) + "' (see conveyor serve --help)";
    }
    if (opt->count() > 0 || name == "config") continue;  // the command line wins
    std::string value;
    if (const auto* arr = node.as_array()) {  // a repeatable setting (api_key = ["a", "b"])
      for (const auto& el : *arr) {
        if (!el.is_string()) return config_path + ": setting '" + std::string(key.str()) + "' must be a list of strings";
        opt->add_result(*el.value<std::string>());
      }
      try {
        opt->run_callback();
      } catch (const CLI::Error& e) {
        return config_path + ": setting '" + std::string(key.str()) + "': " + e.what();
      }
      continue;
    }
    if (const auto* t = node.as_table(); t && name == "speculative-config") {  // [speculative_config] as the JSON object
      std::ostringstream json;
      json << toml::json_formatter{*t};
      value = json.str();
    } else if (node.is_string()) value = *node.value<std::string>();
    else if (node.is_boolean()) value = *node.value<bool>() ? "true" : "false";
    else if (node.is_integer()) value = std::to_string(*node.value<int64_t>());
    else if (node.is_floating_point()) value = std::to_string(*node.value<double>());
    else return config_path + ": setting '" + std::string(key.str()) + "' must be a string, number or boolean";
    try {
      opt->add_result(value);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return config_path + ": setting '" + std::string(key.str()) + "': " + e.what();
    }
  }
  return {};
}

std::string serve_options::validate() const {
  if (!parse_scheduling_policy(scheduling_policy)) return "scheduling_policy must be fcfs or priority, not '" + scheduling_policy + "'";
  if (!parse_batching_mode(batching)) return "batching must be continuous or static, not '" + batching + "'";
  if (max_model_len < 0) return "max_model_len must be >= 0 (0: the model's context)";
  if (max_num_queued_reqs < 0 || max_num_queued_tokens < 0) return "max_num_queued_reqs / max_num_queued_tokens must be >= 0 (0: unbounded)";
  if (!std::isfinite(drain_timeout_s) || drain_timeout_s < 0 || drain_timeout_s > 86400)
    return "drain_timeout must be a number of seconds in [0, 86400], not " + std::to_string(drain_timeout_s);
  if (!std::isfinite(kv_watermark) || kv_watermark < 0 || kv_watermark >= 1)
    return "kv_watermark must be in [0, 1), not " + std::to_string(kv_watermark);
  if (max_num_seqs < 1 || max_num_seqs > 65536) return "max_num_seqs must be in 1..65536, not " + std::to_string(max_num_seqs);
  if (max_num_batched_tokens < 1 || max_num_batched_tokens > (1 << 20))
    return "max_num_batched_tokens must be in 1..1048576, not " + std::to_string(max_num_batched_tokens);
  if (block_size < 1 || block_size > 1024) return "block_size must be in 1..1024, not " + std::to_string(block_size);
  if (num_kv_blocks < 0) return "num_kv_blocks must be >= 0 (0: derived from kv_cache_bytes)";
  if (worker_threads < 0 || worker_threads > 64) return "worker_threads must be in 0..64 (0: the cores minus one)";
  if (metrics_port < -1 || metrics_port > 65535) return "metrics_port must be -1 (off), 0 (any free port) or a TCP port 1..65535";
  if (http_port < -1 || http_port > 65535) return "http_port must be -1 (off), 0 (any free port) or a TCP port 1..65535";
  if (!transport::parse_reasoning_parser(reasoning_parser))
    return "reasoning_parser must be qwen3 or deepseek_r1 (or left out), not '" + reasoning_parser + "'";
  if (!chat_template.empty() && !std::ifstream(chat_template).good())
    return "chat_template: cannot read '" + chat_template + "'; HINT: give a readable Jinja file, or leave it out for the model's own";
  if (http_threads < 1 || http_threads > 64) return "http_threads must be in 1..64, not " + std::to_string(http_threads);
  if (!std::isfinite(http_request_timeout_s) || http_request_timeout_s < 1 || http_request_timeout_s > 86400)
    return "http_request_timeout must be a number of seconds in [1, 86400]";
  if (http_max_body < 1024 || http_max_body > (int64_t{1} << 30))
    return "http_max_body must be in 1024..1073741824 bytes, not " + std::to_string(http_max_body);
  if (!std::isfinite(gpu_memory_utilization) || !(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0))
    return "gpu_memory_utilization must be in (0, 1]";
  if (kv_cache_bytes < 0) return "kv_cache_bytes must be >= 0 (0: sized from the model and the machine)";
  if (threads < 0 || threads > 1024) return "threads must be in 0..1024 (0: every core), not " + std::to_string(threads);
  if (cpu_math != "fast" && cpu_math != "exact") return "cpu_math must be fast or exact, not '" + cpu_math + "'";
  if (!journal::sync_mode_from_string(journal_sync)) return "journal_sync must be process or power, not '" + journal_sync + "'";
  if (poison_after < 0) return "poison_after must be >= 0 (0: never)";
  if (!std::isfinite(retention_s) || retention_s < 0) return "retention must be a number of seconds >= 0";
  if (auto clash = port_clash(); !clash.empty()) return clash;
  if (curve_secret_key.empty() != authorized_keys.empty())
    return "curve_secret_key and authorized_keys go together: give both (CURVE on) or neither (off)";
  if (speculative_config_t c; !speculative_config.empty())
    if (auto e = parse_speculative_config(speculative_config, c); !e.empty()) return e;
  if (!sim::cost_model_preset(sim_cost_model))
    return "sim_cost_model must be one of " + std::string(sim::cost_model_preset_names()) + ", not '" + sim_cost_model + "'";
  return nats.validate();
}

// Two of the server's own endpoints on one TCP port: the second bind would fail with "port in
// use", blaming whatever holds it; name both flags instead.
std::string serve_options::port_clash() const {
  auto tcp_port = [](const std::string& ep) -> int {
    if (ep.rfind("tcp://", 0) != 0) return -1;
    const auto colon = ep.rfind(':');
    if (colon == std::string::npos || colon < 6) return -1;
    try {
      size_t used = 0;
      const int p = std::stoi(ep.substr(colon + 1), &used);
      return used == ep.size() - colon - 1 && p > 0 ? p : -1;
    } catch (const std::exception&) {
      return -1;  // "*" (any free port) or not a number: the bind names it
    }
  };
  const std::pair<const char*, int> ports[] = {{"--router", tcp_port(router)}, {"--pub", tcp_port(pub)}, {"--pull", tcp_port(pull)},
                                               {"--http-port", http_port > 0 ? http_port : -1},
                                               {"--metrics-port", metrics_port > 0 ? metrics_port : -1}};
  for (size_t i = 0; i < std::size(ports); ++i)
    for (size_t j = i + 1; j < std::size(ports); ++j)
      if (ports[i].second > 0 && ports[i].second == ports[j].second)
        return std::string(ports[i].first) + " and " + ports[j].first + " both name port " + std::to_string(ports[i].second) +
               "; give each endpoint its own port";
  return {};
}

std::string serve_options::check_http_security(bool keys_set, std::vector<std::string>& warnings) const {
  if (keys_set) return {};
  if (http_port >= 0 && !transport::is_loopback_host(http_host)) {
    if (!curve_secret_key.empty() && !allow_unauthenticated_http)
      return "the HTTP intake listens on " + http_host + " without API keys while CURVE locks ZeroMQ: anyone who reaches it could "
             "run jobs. Pass --api-key KEY (or --api-key-file), or --allow-unauthenticated-http if that is intended";
    warnings.push_back("the HTTP intake on " + http_host + " accepts other hosts without API keys (anyone can run jobs); pass --api-key "
                       "KEY or --api-key-file, and put a TLS proxy in front (docs/http.md)");
  }
  if (metrics_port >= 0 && !transport::is_loopback_host(metrics_host))
    warnings.push_back("/metrics on " + metrics_host + " answers other hosts without API keys; pass --api-key KEY to require one");
  return {};
}

std::string serve_options::journal_file() const {
  if (!journal || nats.enabled()) return {};
  return journal::journal::file_in(state_dir.empty() ? journal::journal::default_state_dir() : state_dir);
}

executor_settings serve_options::executor() const {
  executor_settings s;
  s.block_size = block_size;
  s.kv_cache_bytes = kv_cache_bytes;
  s.num_kv_blocks = num_kv_blocks;
  s.max_model_len = max_model_len;
  s.threads = threads;
  s.cpu_math = cpu_math;
  s.gpu_memory_utilization = gpu_memory_utilization;
  s.max_num_batched_tokens = max_num_batched_tokens;
  s.max_num_seqs = max_num_seqs;
  s.sim_cost_model = sim_cost_model;
  // The CUDA executor verifies drafts only when asked (explicitly: speculation is not on by default
  // there), and is batch-invariant then (docs/gpu.md §3).
  if (speculative_config_t c = default_speculative_config(); !speculative_config.empty() &&
                                                             parse_speculative_config(speculative_config, c).empty() && c.enabled())
    s.max_drafts = c.num_speculative_tokens;
  return s;
}

runtime_options serve_options::runtime(const executor_info& info, const std::string& model_path) const {
  runtime_options r;
  r.sched.max_num_seqs = max_num_seqs;
  r.sched.max_num_batched_tokens = max_num_batched_tokens;
  const int32_t pool_tokens = info.num_kv_blocks * info.block_size;
  r.sched.max_model_len = max_model_len > 0 ? max_model_len : default_max_model_len(info.max_model_len, pool_tokens);
  r.sched.policy = *parse_scheduling_policy(scheduling_policy);
  r.sched.batching = *parse_batching_mode(batching);
  r.sched.async_scheduling = async_scheduling;
  if (max_num_queued_reqs > 0) r.sched.max_num_queued_reqs = max_num_queued_reqs;
  if (max_num_queued_tokens > 0) r.sched.max_num_queued_tokens = max_num_queued_tokens;
  // Speculative decoding where the executor verifies drafts; the explicit setting elsewhere is
  // refused by check_sizing().
  r.sched.speculative = default_speculative_config();
  if (!speculative_config.empty()) (void)parse_speculative_config(speculative_config, r.sched.speculative);  // validate() checked it
  if (!info.verifies_drafts && speculative_config.empty()) r.sched.speculative.method = spec_method::none;
  if (r.sched.speculative.fixed_cost_tokens <= 0.0) r.sched.speculative.fixed_cost_tokens = info.step_fixed_cost_tokens;
  r.cache.block_size = info.block_size;
  r.cache.enable_prefix_caching = enable_prefix_caching;
  r.cache.kv_watermark = kv_watermark;
  r.router_ep = router;
  r.pub_ep = pub;
  r.pull_ep = pull;
  r.model_name = served_model_name.empty() ? std::filesystem::path(model_path).filename().string() : served_model_name;
  // One core is left to the threads that must answer at once (intakes, front, scheduler,
  // executor, publisher): with every core tokenizing a burst, a status waited for the OS
  // scheduler (docs/benchmarks.md "Front door").
  r.worker_threads = worker_threads > 0 ? worker_threads : std::max(1, static_cast<int>(model::usable_cores()) - 1);
  r.metrics_port = metrics_port;
  r.metrics_host = metrics_host;
  r.http.port = http_port;
  r.http.host = http_host;
  r.http.threads = http_threads;
  r.http.request_timeout_s = http_request_timeout_s;
  r.http.max_body_bytes = static_cast<size_t>(http_max_body);
  r.http.reasoning = *transport::parse_reasoning_parser(reasoning_parser);
  if (!chat_template.empty()) {
    std::ifstream in(chat_template, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    r.chat_template = text.str();
  }
  r.trace_path = trace;
  r.pub.retention_s = retention_s;
  r.poison_after = poison_after;
  if (!curve_secret_key.empty()) r.curve = transport::load_curve_server_config(curve_secret_key, authorized_keys);
  r.nats = nats;
  return r;
}

} // namespace conveyor::serve
