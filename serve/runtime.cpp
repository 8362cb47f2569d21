#include "serve/runtime.hpp"

#include <algorithm>
#include <thread>

#include "actors/executor_actor.hpp"
#include "actors/job_session.hpp"
#include "actors/recovery.hpp"
#include "actors/trace_writer.hpp"

namespace conveyor::serve {

std::vector<std::unique_ptr<transport::intake>> make_intakes(zmq::context_t& zmq, const runtime_options& o) {
  std::vector<std::unique_ptr<transport::intake>> in;
  in.push_back(std::make_unique<transport::router_intake>(zmq, o.router_ep, o.limits, o.curve));
  in.push_back(std::make_unique<transport::pull_intake>(zmq, o.pull_ep, o.limits, o.curve));
  if (o.nats.enabled()) in.push_back(std::make_unique<transport::nats_intake>(o.nats, o.limits, o.sched.max_num_seqs));
  if (o.http.port >= 0) in.push_back(std::make_unique<transport::http_intake>(o.http_config()));
  return in;
}

bound_endpoints::bound_endpoints(const runtime_options& o) {
  if (o.curve.enabled()) zap = std::make_unique<transport::zap_authenticator>(zmq, o.curve.authorized);
  if (o.metrics_port >= 0)
    metrics = std::make_unique<transport::metrics_http>(o.metrics_host, o.metrics_port, transport::metrics_http::render_fn{}, o.api_keys);
  pub = std::make_shared<transport::pub_socket>(zmq, o.pub_ep, o.curve);
  intakes = make_intakes(zmq, o);
}

transport::intake* bound_endpoints::find(std::string_view name) const {
  for (const auto& in : intakes)
    if (name == in->name()) return in.get();
  return nullptr;
}

const std::string& runtime::endpoint_of(std::string_view name) const {
  static const std::string none;
  const transport::intake* in = eps_->find(name);
  return in ? in->endpoint() : none;
}

runtime::runtime(const runtime_options& o, std::shared_ptr<executor> ex, const model::tokenizer& tok)
    : runtime(o, nullptr, std::move(ex), tok) {}

runtime::runtime(const runtime_options& o, std::unique_ptr<bound_endpoints> eps, std::shared_ptr<executor> ex,
                 const model::tokenizer& tok)
    : eps_(std::move(eps)) {
  // What the last incarnation left (throws journal_error on a damaged file, before anything runs).
  actors::recovery_plan plan;
  if (o.journal) {
    plan = actors::plan_recovery(o.journal->load(), o.poison_after, o.journal->path());
    o.journal->open_for_writing();  // only now: a journal refused while loading stays untouched
  }
  recovered_ = {plan.finished.size(), plan.resumed.size(), plan.poisoned.size()};
  if (!o.trace_path.empty()) {
    const actors::trace_header th{o.sched.batching, o.sched.max_num_seqs, o.sched.max_num_batched_tokens,
                          ex->info().num_kv_blocks, ex->info().block_size, o.model_name};
    trace_ = std::make_shared<actors::trace_writer>(o.trace_path, th, actors::now_s());
  }
  // Everything that can fail to bind comes first, before any thread or actor exists: a taken
  // port then ends start-up cleanly (exit 2) instead of leaving actors behind.
  if (!eps_) eps_ = std::make_unique<bound_endpoints>(o);
  if (eps_->metrics) eps_->metrics->set_render([this] { return render_metrics(); });
  pub_ = eps_->pub->endpoint();

  caf_cfg_.set("scheduler.max-threads", o.worker_threads);
  caf_cfg_.set("logger.console", caf::atom("none"));
  sys_ = std::make_unique<caf::actor_system>(caf_cfg_);
  actors::scheduler_actor_config sc;
  sc.sched = o.sched;
  sc.cache = o.cache;
  sc.num_kv_blocks = ex->info().num_kv_blocks;
  if (!ex->info().scores_prompts) sc.sched.no_prompt_logprobs_on = ex->info().device;
  sc.pipelined = o.sched.async_scheduling && ex->info().async_steps;
  sc.trace = trace_;
  sc.restored_finished = std::move(plan.finished);
  for (const auto& r : plan.resumed) sc.restored_unfinished.push_back(r.job.id);
  for (const auto& p : plan.poisoned) sc.restored_finished.push_back({p.job_id, job_info{job_state::failed, 0, 0, std::nullopt}, actors::unix_now()});
  sc.retention_s = o.pub.retention_s;
  sc.max_remembered_jobs = o.pub.max_retained_jobs;
  sc.waiting_gauge = &waiting_jobs_;  // intake_context::free_slots reads it
  const int32_t executor_vocab = ex->info().vocab_size;
  executor_ = actors::spawn_executor(*sys_, std::move(ex));
  scheduler_ = actors::spawn_scheduler(*sys_, sc, *executor_, control_);
  actors::publisher_config pc = o.pub;
  pc.journal = o.journal;
  pc.resumed_logs = std::move(plan.logs);
  pc.sinks.push_back(std::move(eps_->pub));  // the publisher's thread is its only user from here on
  bool pc_typed_sinks = false;  // only the intakes' sinks read typed events; PUB reads bytes
  for (const auto& in : eps_->intakes)
    if (transport::event_sink* sink = in->events()) {  // (owned by the intake list, which outlives the publisher)
      pc.sinks.push_back(std::shared_ptr<transport::event_sink>(std::shared_ptr<void>(), sink));
      pc_typed_sinks = true;
    }
  publisher_ = actors::spawn_publisher(*sys_, *scheduler_, std::move(pc), &control_);
  try {
    grammars_ = std::make_unique<model::grammar_compiler>(tok, executor_vocab);
  } catch (const std::exception&) {
    grammars_.reset();  // structured outputs are refused ("not available on this server"); the rest serves
  }
  try {
    chat_ = std::make_unique<model::chat_template>(o.chat_template ? model::chat_template(*o.chat_template, model::chat_template::tokens_of(tok))
                                                                   : model::chat_template::for_model(tok));
  } catch (const model::chat_template_error& e) {
    chat_error_ = e.what();  // jobs with `messages` are refused; prompts and token ids serve
  }
  tools_ = load_tool_support(tok, o.chat_template.value_or(tok.chat_template()), grammars_.get());
  actors::front_context ctx{&tok,           *scheduler_,    *publisher_, &metrics_,  o.model_name, &draining_, &live_requests_,
                            o.journal != nullptr, grammars_.get(), chat_.get()};
  ctx.typed_events = pc_typed_sinks;
  ctx.control = &control_;
  front_ = actors::spawn_front(*sys_, ctx);
  if (o.journal) {
    caf::anon_send(*scheduler_, actors::s_journal_atom::value, *publisher_);
    for (const auto& p : plan.poisoned) caf::anon_send(*publisher_, actors::p_event_atom::value, actors::poison_event(p, o.poison_after));
    for (auto& r : plan.resumed) {
      const double arrival_s = actors::now_s() - std::max(0.0, actors::unix_now() - r.resume.arrival_unix);
      actors::spawn_request(*sys_, std::move(r.job), arrival_s, transport::reply_to{}, ctx, std::move(r.resume));
    }
  }
  door_ = std::make_unique<actors::front_door>(*front_);
  if (eps_->metrics) eps_->metrics->start();
  transport::intake_context ic;
  ic.sink = door_.get();
  ic.piece = [&tok](token_id t) { return tok.piece(t, /*special=*/true); };
  // The health check: draining, or a failure that stops the server.
  ic.unhealthy = [this]() -> std::optional<std::string> {
    if (control_.stopping()) return "stopping: " + control_.why();
    if (draining_.load()) return std::string("draining: no new jobs");
    return std::nullopt;
  };
  // A replica takes jobs from a shared queue only while it can admit them now: free sequence
  // slots, and nothing waiting for KV blocks or the token budget.
  ic.free_slots = [this, max = int64_t{o.sched.max_num_seqs}] { return waiting_jobs_.load() > 0 ? 0 : max - live_requests_.load(); };
  ic.tokenize = [m = actors::session_models{&tok, chat_.get(), nullptr}](const schemas::submit_request& job)
      -> std::variant<std::vector<token_id>, std::string> {
    auto ids = actors::prompt_tokens(job.input, m, job.chat_template_kwargs);
    if (auto* why = std::get_if<refusal>(&ids)) return std::move(why->message);
    return std::move(std::get<std::vector<token_id>>(ids));
  };
  ic.detokenize = [&tok](const std::vector<token_id>& ids) -> std::optional<std::string> {
    for (token_id t : ids)
      if (t < 0 || t >= tok.vocab_size()) return std::nullopt;
    return tok.decode(ids, /*special=*/true);
  };
  ic.plan_chat = make_plan_chat(tok, tools_, grammars_.get());
  ic.max_model_len = o.sched.max_model_len;
  for (const auto& in : eps_->intakes) in->start(ic);
}

std::optional<std::string> runtime::render_metrics() {
  caf::scoped_actor self{*sys_};
  std::optional<serving_stats> s;
  self->request(*scheduler_, std::chrono::seconds(5), actors::s_stats_atom::value)
      .receive([&](serving_stats& x) { s = x; }, [](caf::error&) {});
  if (!s) return std::nullopt;
  return actors::render_prometheus(metrics_.snapshot(), *s);
}

runtime::~runtime() { shutdown(0.0); }

int runtime::shutdown(double timeout_s) {
  if (stopped_) return control_.wait();
  stopped_ = true;
  draining_ = true;
  for (const auto& in : eps_->intakes) in->stop_accepting();  // (NATS: no new jobs from the fleet's queue)
  {
    caf::scoped_actor self{*sys_};
    self->request(*scheduler_, caf::infinite, actors::s_drain_atom::value, timeout_s).receive([](bool) {}, [](caf::error&) {});
    // Every job has ended; wait for the request actors to publish their last events, then make
    // sure the publisher has sent them (its mailbox is FIFO, so our fetch comes after them).
    for (int i = 0; i < 500 && live_requests_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    self->request(*publisher_, std::chrono::seconds(5), actors::p_fetch_atom::value, std::string(), int64_t{0}, int64_t{0})
        .receive([](actors::fetch_result&) {}, [](caf::error&) {});
  }
  // Every job ended: HTTP's handlers have answered, NATS stores the last events and hands
  // unfinished jobs back.
  for (const auto& in : eps_->intakes) in->stop();
  if (eps_->metrics) eps_->metrics->stop();  // its handler asks the scheduler: stop it while the actors live
  caf::anon_send_exit(*front_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(*publisher_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(*scheduler_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(*executor_, caf::exit_reason::user_shutdown);
  door_.reset();
  front_.reset();
  publisher_.reset();
  scheduler_.reset();
  executor_.reset();
  sys_.reset();  // waits for every actor
  if (trace_) trace_->close();  // the last steps reach the file
  control_.request_stop(0, "shutdown");
  return control_.wait();
}

} // namespace conveyor::serve
