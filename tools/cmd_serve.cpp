// `conveyor serve`: the ZeroMQ server. Settings come from --config (TOML, same names as the
// flags) and the flags; derived values (KV blocks, max_model_len) are computed once and logged
// in the start-up line. SIGINT/SIGTERM drain: no new jobs, running ones finish within
// --drain-timeout, the rest are cancelled with events; exit 0 (1 after an executor failure).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <csignal>
#include <thread>
#include <sys/resource.h>
#include <unistd.h>

#include "actors/runtime.hpp"
#include "actors/trace_writer.hpp"
#include "engine/null_executor.hpp"
#include "engine/sim/sim_executor.hpp"
#include "gpu/factory.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/weight_check.hpp"
#include "model/model_path.hpp"
#include "tools/commands.hpp"
#include "tools/serve_options.hpp"
#include "transport/api_keys.hpp"
#include "transport/curve.hpp"
#include "transport/nats_link.hpp"

namespace conveyor::tools {
namespace {

// Self-pipe: the handler (on whatever thread the kernel picks, OpenBLAS's included) only writes
// the signal number; a plain thread reads it and starts the drain.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(g_signal_pipe[1], &b, 1);
}

void install_stop_handlers() {
  if (g_signal_pipe[0] < 0 && ::pipe(g_signal_pipe) != 0) throw std::runtime_error("pipe() failed");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // re-reads --api-key-file
}

// A max_model_len derived from the KV pool (a quarter of it) below the model's context: a
// warning, or for a pool too small to serve anything (--num-kv-blocks 1) a refusal.
std::string check_derived_max_model_len(const serve_options& o, const actors::runtime_options& ro, const executor_info& info) {
  constexpr int32_t min_useful = 64;
  const int32_t derived = ro.sched.max_model_len, pool = info.num_kv_blocks * info.block_size;
  if (o.max_model_len > 0 || derived >= info.max_model_len) return {};
  if (derived < min_useful)
    return "the KV pool holds " + std::to_string(pool) + " tokens (" + std::to_string(info.num_kv_blocks) + " blocks x " +
           std::to_string(info.block_size) + "), so max_model_len would be " + std::to_string(derived) +
           " tokens (a quarter of it): too small to serve. Give the pool more blocks (--num-kv-blocks, --kv-cache-bytes) or set "
           "--max-model-len (at most the pool's size)";
  if (o.device == "cpu" || o.device == "cuda")
    spdlog::warn("conveyor serve: max_model_len is {} tokens, a quarter of the KV pool ({} tokens), below the model's context of {}: "
                 "longer jobs are refused (too_long); raise --kv-cache-bytes / --num-kv-blocks or set --max-model-len",
                 derived, pool, info.max_model_len);
  return {};
}

// Each HTTP connection and stream is a descriptor: the soft limit (often 1,024) is raised to the
// hard one, so a thousand concurrent streams are not refused by the kernel.
void raise_descriptor_limit() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int run_serve(const serve_options& o) {
  raise_descriptor_limit();
  if (auto err = o.validate(); !err.empty()) {
    spdlog::error("conveyor serve: {}", err);
    return 2;
  }
  auto keys = std::make_shared<transport::api_keys>(o.api_key, o.api_key_file);
  std::vector<std::string> warnings;
  if (auto err = o.check_http_security(keys->enabled(), warnings); !err.empty()) {
    spdlog::error("conveyor serve: {}", err);
    return 2;
  }
  // A bad journal fails here too, before the model loads.
  std::shared_ptr<journal::journal> jr;
  // With NATS the fleet's jobs and events live in JetStream: a replica that restarts gets its
  // unfinished jobs back as redeliveries, like any other replica, so no local journal.
  if (o.journal && !o.nats.enabled()) jr = std::make_shared<journal::journal>(o.journal_file(), *journal::sync_mode_from_string(o.journal_sync));
  // Every socket is bound before the model loads: a taken port, or a bad CURVE key file (read by
  // runtime()), fails start-up at once.
  const std::string model_path = model::resolve_model(o.model);
  actors::runtime_options bind_opts = o.runtime(executor_info{}, model_path);
  bind_opts.api_keys = keys;
  auto endpoints = std::make_unique<actors::bound_endpoints>(bind_opts);
  auto file = model::open_model(model_path);
  (void)model::llama_config::from_gguf(file);  // an unsupported model fails here, before the tokenizer
  if (o.device == "cpu" || o.device == "cuda") model::check_weights_finite(file);  // NaN or Inf weights: refused, naming the tensor
  auto tok = model::tokenizer::from_gguf(file);
  std::shared_ptr<executor> ex;
  std::string model_desc;
  if (o.device == "sim") {
    // An H100 holds ~430k tokens of Llama-3-8B KV (bf16, 128 KiB each) at 0.9 utilization.
    executor_info info{o.num_kv_blocks > 0 ? o.num_kv_blocks : 27000, o.block_size, tok.vocab_size(), 1 << 20, "sim"};
    ex = std::make_shared<sim::sim_executor>(info, tok.vocab_size() > 1000 ? 1000 : 3, *sim::cost_model_preset(o.sim_cost_model));
    model_desc = "tokenizer of " + file.path() + " (sim executor, " + o.sim_cost_model + " step times)";
  } else if (o.device == "null") {
    executor_info info{o.num_kv_blocks > 0 ? o.num_kv_blocks : 4096, o.block_size, tok.vocab_size(), 1 << 20, "null"};
    ex = std::make_shared<null_executor>(info, tok.vocab_size() > 1000 ? 1000 : 3);
    model_desc = "tokenizer of " + file.path() + " (null executor)";
  } else if (o.device == "cuda") {
    std::string why;
    if (!gpu::cuda_device_available(&why)) {
      spdlog::error("conveyor serve: --device cuda: {}", why);
      return 2;
    }
    gpu::cuda_executor_options go;
    go.block_size = o.block_size;
    go.num_kv_blocks = o.num_kv_blocks;
    go.gpu_memory_utilization = o.gpu_memory_utilization;
    go.max_num_batched_tokens = o.max_num_batched_tokens;
    go.max_num_seqs = o.max_num_seqs;
    go.max_model_len = o.max_model_len;
    ex = gpu::make_cuda_executor(file, go);
    const auto cfg = model::llama_config::from_gguf(file);
    model_desc = cfg.name + " (" + cfg.summary() + "; bf16 on " + gpu::cuda_device_description(0) + ")";
  } else {
    model::cpu_executor_options eo;
    eo.block_size = o.block_size;
    eo.kv_cache_bytes = o.kv_cache_bytes;
    eo.num_kv_blocks = o.num_kv_blocks;
    eo.max_model_len = o.max_model_len;
    eo.threads = o.threads;
    eo.math = model::parse_cpu_math(o.cpu_math);
    auto cpu = std::make_shared<model::cpu_executor>(file, eo);
    model_desc = cpu->config().name + " (" + cpu->config().summary() + "; " + cpu->compute_summary() + ")";
    spdlog::info("conveyor serve: KV cache {}", cpu->kv_sizing());
    ex = cpu;
  }
  actors::runtime_options ro = o.runtime(ex->info(), file.path());
  ro.journal = jr;
  ro.api_keys = keys;
  if (auto err = validate_engine_config(ro.sched, ro.cache, ex->info().num_kv_blocks); !err.empty()) {
    spdlog::error("conveyor serve: {}", err);
    return 2;
  }
  if (auto err = check_derived_max_model_len(o, ro, ex->info()); !err.empty()) {
    spdlog::error("conveyor serve: {}", err);
    return 2;
  }
  if (o.max_model_len > 0 && o.max_model_len > default_max_model_len(o.max_model_len, ex->info().num_kv_blocks * ex->info().block_size))
    spdlog::warn("conveyor serve: max_model_len {} is more than a quarter of the KV pool ({} tokens): one long job can hold "
                 "most of the pool while others wait; raise kv_cache_bytes or lower max_model_len",
                 o.max_model_len, ex->info().num_kv_blocks * ex->info().block_size);
  install_stop_handlers();
  const executor_info info = ex->info();
  actors::runtime rt(ro, std::move(endpoints), std::move(ex), tok);
  spdlog::info("conveyor serve: model {}; device {}; {} KV blocks x {} tokens; max_model_len {}; batching {}{}; router {} pub {} pull {}",
               model_desc, info.device, info.num_kv_blocks, info.block_size, ro.sched.max_model_len,
               to_string(ro.sched.batching), info.async_steps && ro.sched.async_scheduling ? ", steps pipelined" : "",
               rt.router_endpoint(), rt.pub_endpoint(), rt.pull_endpoint());
  if (jr) {
    const auto& r = rt.recovered();
    spdlog::info("conveyor serve: journal {} (sync {}, epoch {}): {} finished jobs remembered, {} resumed, {} ended as poison jobs",
                 jr->path(), o.journal_sync, jr->epoch(), r.finished, r.resumed, r.poisoned);
  } else if (o.nats.enabled()) {
    spdlog::info("conveyor serve: NATS {}: jobs from stream {} (consumer {}, subject {}), events to {}.<id>; no local journal: "
                 "JetStream keeps the jobs (ZeroMQ submits to this replica are not journaled)",
                 o.nats.url, o.nats.jobs_stream, o.nats.consumer, o.nats.jobs_subject, o.nats.events_prefix);
  } else {
    spdlog::warn("conveyor serve: journal off (--no-journal): a crash loses every accepted job that has not finished");
  }
  if (!rt.chat_template_error().empty())
    spdlog::error("conveyor serve: {}; jobs with `messages` will be refused (send `prompt` instead)", rt.chat_template_error());
  if (rt.metrics_port() >= 0) spdlog::info("conveyor serve: metrics at {}", rt.metrics_url());
  if (!rt.http_endpoint().empty())
    spdlog::info("conveyor serve: OpenAI-compatible HTTP at {}/v1 (model name '{}')", rt.http_endpoint(), ro.model_name);
  if (keys->enabled())
    spdlog::info("conveyor serve: HTTP /v1 and /metrics require one of {} API keys{}", keys->count(),
                 o.api_key_file.empty() ? "" : " (" + o.api_key_file + " re-read on SIGHUP)");
  for (const auto& w : warnings) spdlog::warn("conveyor serve: {}", w);
  if (ro.curve.enabled()) {
    spdlog::info("conveyor serve: CURVE on (ROUTER, PULL, PUB); server public key {}; {} authorized client keys",
                 ro.curve.public_key, ro.curve.authorized.size());
  } else {
    for (const auto& ep : {rt.router_endpoint(), rt.pub_endpoint(), rt.pull_endpoint()})
      if (!transport::is_loopback_endpoint(ep))
        spdlog::warn("conveyor serve: {} accepts other hosts without CURVE (anyone can submit and read every stream); "
                     "pass --curve-secret-key and --authorized-keys (keys from `conveyor keygen`)", ep);
  }
  std::thread signals([&] {
    unsigned char sig = 0;
    while (::read(g_signal_pipe[0], &sig, 1) == 1 && sig == SIGHUP) {
      if (o.api_key_file.empty()) continue;
      if (auto err = keys->reload(); err.empty()) spdlog::info("conveyor serve: SIGHUP: {} API keys now", keys->count());
      else spdlog::error("conveyor serve: SIGHUP: {}; the keys in force stay", err);
    }
    if (sig != 0) rt.control().request_stop(0, sig == SIGINT ? "SIGINT" : "SIGTERM");
  });
  const int code = rt.control().wait();
  spdlog::info("conveyor serve: {}: draining (up to {} s)", rt.control().why(), o.drain_timeout_s);
  const unsigned char wake = 0;  // wakes the signal thread if a failure stopped us
  [[maybe_unused]] auto n = ::write(g_signal_pipe[1], &wake, 1);
  signals.join();
  const int rc = rt.shutdown(o.drain_timeout_s);
  spdlog::info("conveyor serve: stopped");
  return code != 0 ? code : rc;
}

} // namespace

void register_serve(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<serve_options>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve generation jobs over ZeroMQ (ROUTER submit/control, PULL submit, PUB streams)");
  o->add_flags(*cmd);
  cmd->callback([o, cmd, &exit_code] {
    try {
      if (auto err = o->apply_config(*cmd); !err.empty()) {
        spdlog::error("conveyor serve: {}", err);
        exit_code = 2;
        return;
      }
      exit_code = run_serve(*o);
    } catch (const model::gguf_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const model::model_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const model::tokenizer_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const transport::bind_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const actors::trace_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const journal::journal_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const transport::nats_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const transport::api_key_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const transport::curve_error& e) {
      spdlog::error("conveyor serve: {}", e.what());
      exit_code = 2;
    } catch (const std::bad_alloc&) {
      spdlog::error("conveyor serve: out of memory while starting; lower --kv-cache-bytes / --num-kv-blocks or --max-num-seqs");
      exit_code = 2;
    } catch (const std::exception& e) {
      spdlog::error("conveyor serve: internal error: {}", e.what());
      exit_code = 1;
    }
  });
}

} // namespace conveyor::tools
