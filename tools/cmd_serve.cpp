// `conveyor serve`: flags and signals. Settings come from --config (TOML, same names as the
// flags) and the flags (serve/options.cpp); serve/server.cpp starts everything and the start-up
// line logs the derived values (KV blocks, max_model_len). SIGINT/SIGTERM drain: no new jobs,
// running ones finish within --drain-timeout, the rest are cancelled with events; exit 0 (1
// after an executor failure). SIGHUP re-reads --api-key-file.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <csignal>
#include <thread>
#include <sys/resource.h>
#include <unistd.h>

#include "actors/trace_writer.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/llama_config.hpp"
#include "model/model_path.hpp"
#include "model/text/tokenizer.hpp"
#include "serve/server.hpp"
#include "serve/spec_options.hpp"
#include "tools/command.hpp"
#include "tools/commands.hpp"
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

// Each HTTP connection and stream is a descriptor: the soft limit (often 1,024) is raised to the
// hard one, so a thousand concurrent streams are not refused by the kernel.
void raise_descriptor_limit() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

void log_start(const serve::server& s, const serve::serve_options& o) {
  const serve::runtime& rt = *s.rt;
  const serve::runtime_options& ro = s.options;
  if (!s.kv_sizing.empty()) spdlog::info("conveyor serve: KV cache {}", s.kv_sizing);
  spdlog::info("conveyor serve: model {}; device {}; {} KV blocks x {} tokens; max_model_len {}; batching {}{}; router {} pub {} pull {}",
               s.model_desc, s.info.device, s.info.num_kv_blocks, s.info.block_size, ro.sched.max_model_len, to_string(ro.sched.batching),
               s.info.async_steps && ro.sched.async_scheduling ? ", steps pipelined" : "", rt.router_endpoint(), rt.pub_endpoint(),
               rt.pull_endpoint());
  spdlog::info("conveyor serve: speculative decoding {}", serve::describe(ro.sched.speculative));
  if (s.journal) {
    const auto& r = rt.recovered();
    spdlog::info("conveyor serve: journal {} (sync {}, epoch {}): {} finished jobs remembered, {} resumed, {} ended as poison jobs",
                 s.journal->path(), o.journal_sync, s.journal->epoch(), r.finished, r.resumed, r.poisoned);
  } else if (o.nats.enabled()) {
    spdlog::info("conveyor serve: NATS {}: jobs from stream {} (consumer {}, subject {}), events to {}.<id>; no local journal: "
                 "JetStream keeps the jobs (ZeroMQ submits to this replica are not journaled)",
                 o.nats.url, o.nats.jobs_stream, o.nats.consumer, o.nats.jobs_subject, o.nats.events_prefix);
  } else {
    spdlog::warn("conveyor serve: journal off (--no-journal): a crash loses every accepted job that has not finished");
  }
  if (!rt.chat_template_error().empty())
    spdlog::error("conveyor serve: {}; jobs with `messages` will be refused (send `prompt` instead)", rt.chat_template_error());
  if (!rt.tool_chat_error().empty())
    spdlog::error("conveyor serve: {}; chat requests with tools will be refused", rt.tool_chat_error());
  if (!rt.tool_chat_warning().empty()) spdlog::warn("conveyor serve: {}", rt.tool_chat_warning());
  if (rt.metrics_port() >= 0) spdlog::info("conveyor serve: metrics at {}", rt.metrics_url());
  if (!rt.http_endpoint().empty())
    spdlog::info("conveyor serve: OpenAI-compatible HTTP at {}/v1 (model name '{}')", rt.http_endpoint(), ro.model_name);
  if (s.keys->enabled())
    spdlog::info("conveyor serve: HTTP /v1 and /metrics require one of {} API keys{}", s.keys->count(),
                 o.api_key_file.empty() ? "" : " (" + o.api_key_file + " re-read on SIGHUP)");
  for (const auto& w : s.warnings) spdlog::warn("conveyor serve: {}", w);
  if (ro.curve.enabled()) {
    spdlog::info("conveyor serve: CURVE on (ROUTER, PULL, PUB); server public key {}; {} authorized client keys",
                 ro.curve.public_key, ro.curve.authorized.size());
  } else {
    for (const auto& ep : {rt.router_endpoint(), rt.pub_endpoint(), rt.pull_endpoint()})
      if (!transport::is_loopback_endpoint(ep))
        spdlog::warn("conveyor serve: {} accepts other hosts without CURVE (anyone can submit and read every stream); "
                     "pass --curve-secret-key and --authorized-keys (keys from `conveyor keygen`)", ep);
  }
}

int run_serve(const serve::serve_options& o) {
  raise_descriptor_limit();
  std::unique_ptr<serve::server> s = serve::start_server(o);  // (a signal while the model loads ends the process)
  install_stop_handlers();
  serve::runtime& rt = *s->rt;
  log_start(*s, o);
  std::thread signals([&] {
    unsigned char sig = 0;
    while (::read(g_signal_pipe[0], &sig, 1) == 1 && sig == SIGHUP) {
      if (o.api_key_file.empty()) continue;
      if (auto err = s->keys->reload(); err.empty()) spdlog::info("conveyor serve: SIGHUP: {} API keys now", s->keys->count());
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
  // Every error that stops start-up names the problem and the fix, and exits 2; a bug exits 1.
  auto [cmd, o] = add_command<serve::serve_options>(
      app, exit_code, "serve", "Serve generation jobs over ZeroMQ (ROUTER submit/control, PULL submit, PUB streams)",
      [](serve::serve_options& opts, CLI::App& self) {
        return run_reporting_errors("serve", error_sink::log, [&] {
          if (auto err = opts.apply_config(self); !err.empty()) throw serve::startup_error(err);
          return run_serve(opts);
        }, "out of memory while starting; lower --kv-cache-bytes / --num-kv-blocks or --max-num-seqs");
      });
  o->add_flags(*cmd);
}

} // namespace conveyor::tools
