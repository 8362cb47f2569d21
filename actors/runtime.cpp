#include "actors/runtime.hpp"

#include <thread>

#include "actors/executor_actor.hpp"
#include "actors/trace_writer.hpp"

namespace conveyor::actors {

runtime::runtime(const runtime_options& o, std::shared_ptr<executor> ex, const model::tokenizer& tok) {
  if (!o.trace_path.empty()) {
    const trace_header th{o.sched.batching, o.sched.max_num_seqs, o.sched.max_num_batched_tokens,
                          ex->info().num_kv_blocks, ex->info().block_size, o.model_name};
    trace_ = std::make_shared<trace_writer>(o.trace_path, th, now_s());
  }
  // Bound before any actor exists, so a taken port fails fast (an exception after the spawns
  // would leave actors with timers behind). It serves only from start(), below.
  if (o.metrics_port >= 0)
    http_ = std::make_unique<transport::metrics_http>(o.metrics_host, o.metrics_port, [this] { return render_metrics(); });
  caf_cfg_.set("scheduler.max-threads", o.worker_threads);
  caf_cfg_.set("logger.console", caf::atom("none"));
  sys_ = std::make_unique<caf::actor_system>(caf_cfg_);
  auto pub_sock = std::make_shared<transport::pub_socket>(zmq_, o.pub_ep);
  pub_ = pub_sock->endpoint();
  scheduler_actor_config sc;
  sc.sched = o.sched;
  sc.cache = o.cache;
  sc.num_kv_blocks = ex->info().num_kv_blocks;
  sc.trace = trace_;
  const int32_t max_model_len = o.sched.max_model_len;
  executor_ = spawn_executor(*sys_, std::move(ex));
  scheduler_ = spawn_scheduler(*sys_, sc, *executor_, control_);
  publisher_ = spawn_publisher(*sys_, std::move(pub_sock), *scheduler_, o.pub);
  request_context ctx{&tok, *scheduler_, *publisher_, max_model_len, &metrics_};
  handler_ = std::make_unique<intake_handler>(*sys_, ctx, o.limits, o.model_name, draining_, live_requests_);
  intake_ = std::make_unique<transport::intake>(zmq_, o.router_ep, o.pull_ep, *handler_);
  router_ = intake_->router_endpoint();
  pull_ = intake_->pull_endpoint();
  if (http_) http_->start();
  intake_->start();
}

std::optional<std::string> runtime::render_metrics() {
  caf::scoped_actor self{*sys_};
  std::optional<runtime_stats> s;
  self->request(*scheduler_, std::chrono::seconds(5), stats_atom::value)
      .receive([&](runtime_stats& x) { s = x; }, [](caf::error&) {});
  if (!s) return std::nullopt;
  const scheduler_numbers n{s->running, s->waiting, s->kv_usage, s->prompt_tokens, s->generation_tokens, s->preemptions};
  return render_prometheus(metrics_.snapshot(), n);
}

runtime::~runtime() { shutdown(0.0); }

int runtime::shutdown(double timeout_s) {
  if (stopped_) return control_.wait();
  stopped_ = true;
  draining_ = true;
  {
    caf::scoped_actor self{*sys_};
    self->request(*scheduler_, caf::infinite, drain_atom::value, timeout_s).receive([](bool) {}, [](caf::error&) {});
    // Every job has ended; wait for the request actors to publish their last events, then make
    // sure the publisher has sent them (its mailbox is FIFO, so our fetch comes after them).
    for (int i = 0; i < 500 && live_requests_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    self->request(*publisher_, std::chrono::seconds(5), fetch_atom::value, std::string(), int64_t{0}, int64_t{0})
        .receive([](fetch_result&) {}, [](caf::error&) {});
  }
  intake_->stop();
  if (http_) http_->stop();  // its handler asks the scheduler: stop it while the actors live
  caf::anon_send_exit(*publisher_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(*scheduler_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(*executor_, caf::exit_reason::user_shutdown);
  handler_.reset();
  publisher_.reset();
  scheduler_.reset();
  executor_.reset();
  sys_.reset();  // waits for every actor
  if (trace_) trace_->close();  // the last steps reach the file
  intake_.reset();
  control_.request_stop(0, "shutdown");
  return control_.wait();
}

} // namespace conveyor::actors
