// The actor tier's harness: scripted executor, fake publisher, recording reply channel, a tiny
// byte-level tokenizer, and the wiring of the real actors on CAF's test coordinator.
#include "harness.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <stdexcept>

#include "actors/executor_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "model/text/unicode_bytes.hpp"

namespace conveyor::actor_test {
namespace {

constexpr int32_t kBlocks = 256, kBlockSize = 4, kMaxModelLen = 256;

executor_info make_info() {
  executor_info i;
  i.num_kv_blocks = kBlocks;
  i.block_size = kBlockSize;
  i.vocab_size = 257;
  i.max_model_len = kMaxModelLen;
  i.device = "cpu";
  return i;
}

caf::actor_system_config& testing(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  return cfg;
}

struct fake_pub_state {
  static inline const char* name = "fake_publisher";
  publisher_log* log = nullptr;
  std::vector<caf::response_promise> held;
};

fake_publisher::behavior_type fake_publisher_impl(fake_publisher::stateful_pointer<fake_pub_state> self, publisher_log* log) {
  self->state.log = log;
  return {
      [self](actors::p_event_atom, const schemas::published_event& ev) {
        auto& st = self->state;
        const bool requested = self->current_mailbox_element()->mid.is_request();
        st.log->events.push_back({ev.job_id(), json::from_msgpack(ev.wire), ev.wire, ev.terminal(), true, requested});
        if (requested && st.log->hold) {
          st.held.push_back(self->make_response_promise());
          st.log->held = st.held.size();
        }
      },
      [self](actors::p_refusal_atom, const schemas::published_event& ev) {
        self->state.log->events.push_back({ev.job_id(), json::from_msgpack(ev.wire), ev.wire, false, false, false});
      },
      // An accepted job: its `accepted` event, logged (the real publisher stores the request
      // with it when the journal is on; this one keeps the request for the test).
      [self](actors::p_accept_atom, const schemas::wire_bytes& request, double, const schemas::published_event& ev) {
        auto& st = self->state;
        st.log->requests[ev.job_id()] = request;
        st.log->events.push_back({ev.job_id(), json::from_msgpack(ev.wire), ev.wire, ev.terminal(), true, true});
        if (st.log->hold_accepts) {  // as a journal commit that takes long
          st.held.push_back(self->make_response_promise());
          st.log->held = st.held.size();
        }
      },
      [self](actors::p_running_atom, const std::vector<std::string>& ids) {
        auto& runs = self->state.log->first_runs;
        runs.insert(runs.end(), ids.begin(), ids.end());
      },
      [self](actors::p_cancel_atom, const std::string& id) { self->state.log->cancels.push_back(id); },
      [](actors::p_flush_atom) {},
      [self](actors::p_fetch_atom, const std::string& id, int64_t from, int64_t max_events) -> actors::fetch_result {
        actors::fetch_result r;
        std::vector<schemas::wire_bytes> all;
        for (const auto& p : self->state.log->events)
          if (p.logged && p.job_id == id) {
            all.push_back(p.bytes);
            r.complete = r.complete || p.terminal;
          }
        if (all.empty()) return {};
        r.found = true;
        r.next_seq = all.size();
        const auto n = static_cast<int64_t>(all.size());
        const int64_t begin = std::clamp<int64_t>(from, 0, n), end = std::min(n, begin + std::max<int64_t>(max_events, 0));
        r.events.assign(all.begin() + begin, all.begin() + end);
        r.complete = r.complete && end == n;
        return r;
      },
      [](actors::p_tick_atom) {},
      [self](t_release_atom) {
        auto& st = self->state;
        for (auto& rp : st.held) rp.deliver(caf::unit);
        st.held.clear();
        st.log->held = 0;
      },
  };
}

} // namespace

// 256 byte tokens (id = byte value) and <|endoftext|> (id 256, EOS).
model::tokenizer make_byte_tokenizer() {
  model::vocab_data v;
  v.pre = "smollm";
  for (int b = 0; b < 256; ++b) {
    v.tokens.emplace_back(model::byte_to_unicode(static_cast<uint8_t>(b)));
    v.token_types.push_back(static_cast<int32_t>(model::token_kind::normal));
  }
  v.tokens.emplace_back("<|endoftext|>");
  v.token_types.push_back(static_cast<int32_t>(model::token_kind::control));
  v.eos = 256;
  return model::tokenizer(std::move(v));
}


step_result scripted_executor::step(const step_plan& plan) {
  ++steps;
  if (fail_next) {
    fail_next = false;
    throw std::runtime_error("device lost (scripted)");
  }
  step_result r;
  r.step_id = plan.step_id;
  for (const auto& s : plan.seqs) {
    seen.insert(s.id);
    if (!s.sample) continue;
    const int k = sampled[s.id]++;
    r.sampled.push_back({s.id, static_cast<token_id>('a' + k % 26), -0.5f, {}});
  }
  return r;
}

void scripted_executor::submit(const step_plan& plan) {
  ++submits;
  for (const auto& s : plan.seqs) placeholders += static_cast<int>(std::count(s.tokens.begin(), s.tokens.end(), k_previous_sample));
  executor::submit(plan);
  max_outstanding = std::max(max_outstanding, num_outstanding());
}

schemas::submit_request make_job(const std::string& id, int32_t max_tokens, std::vector<std::string> stop) {
  schemas::submit_request j;
  j.id = id;
  j.input = std::string("hi");
  j.max_tokens = max_tokens;
  j.temperature = 0.0f;
  j.seed = 1;
  j.stop = std::move(stop);
  return j;
}

harness::harness(harness_options o)
    : tok(make_byte_tokenizer()), ex(std::make_shared<scripted_executor>(make_info())), sys(testing(cfg_)),
      sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
  actors::scheduler_actor_config sc;
  sc.sched.max_num_seqs = o.max_num_seqs;
  sc.sched.max_model_len = kMaxModelLen;
  sc.cache.block_size = kBlockSize;
  sc.cache.enable_prefix_caching = false;
  sc.num_kv_blocks = kBlocks;
  sc.pipelined = o.pipelined;
  executor = actors::spawn_executor(sys, ex, /*detached=*/false);
  executor_job_ = dynamic_cast<caf::resumable*>(caf::actor_cast<caf::abstract_actor*>(executor));
  scheduler = actors::spawn_scheduler(sys, sc, executor, control, /*detached=*/false);
  publisher = sys.spawn(fake_publisher_impl, &log);
  actors::front_context ctx;
  ctx.tok = &tok;
  ctx.sched = scheduler;
  ctx.pub = publisher;
  ctx.registry = &registry;
  ctx.model_name = "tiny";
  ctx.live_requests = &live_requests;
  ctx.journal = true;  // request actors send each job's submit map with its `accepted` (log.requests)
  ctx.control = &control;  // a test that requests a stop sees new jobs refused
  front = actors::spawn_front(sys, ctx, /*detached=*/false);
  run();
}

harness::~harness() {
  for (auto& a : helpers_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(front, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(publisher, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(executor, caf::exit_reason::user_shutdown);
  sched.run();
  // Delayed messages still pending hold their (now dead) targets: deliver them, to be dropped.
  while (sched.trigger_timeouts() > 0) sched.run();
}

uint64_t harness::send(schemas::decode_result request) {
  const uint64_t tag = next_tag_++;
  actors::front_door{front}.deliver({&channel_, tag}, std::move(request));
  return tag;
}

void harness::push(schemas::decode_result request) { actors::front_door{front}.deliver({}, std::move(request)); }

uint64_t harness::submit(const std::string& id, int32_t max_tokens, std::vector<std::string> stop) {
  return send(make_job(id, max_tokens, std::move(stop)));
}

uint64_t harness::cancel(const std::string& id) { return send(schemas::cancel_request{id}); }

uint64_t harness::status(const std::string& id) { return send(schemas::status_request{id}); }

void harness::drain(double timeout_s) {
  // The arguments go through spawn: CAF 0.17 binds a null reference (UBSan) when a function
  // actor is spawned with none.
  auto requester = [](caf::event_based_actor* self, actors::scheduler_actor s, double t, std::vector<bool>* out) {
    self->request(s, caf::infinite, actors::s_drain_atom::value, t).then([out](bool b) { out->push_back(b); });
  };
  helpers_.push_back(sys.spawn(requester, scheduler, timeout_s, &drain_replies));
}

void harness::release() { caf::anon_send(publisher, t_release_atom::value); }

size_t harness::run() { return sched.run(); }

size_t harness::settle() {
  return sched.run_jobs_filtered([this](caf::resumable* r) { return r != executor_job_; });
}

bool harness::step_pending() const {
  return std::find(sched.jobs.begin(), sched.jobs.end(), executor_job_) != sched.jobs.end();
}

void harness::step() {
  settle();
  BOOST_REQUIRE_MESSAGE(step_pending(), "no step waits for the executor");
  sched.prioritize(executor);
  sched.run_once();
  settle();
}

std::vector<json> harness::replies(uint64_t tag) const {
  std::vector<json> out;
  for (const auto& [t, bytes] : channel_.got)
    if (t == tag) out.push_back(json::from_msgpack(bytes));
  return out;
}

json harness::reply(uint64_t tag) const {
  auto r = replies(tag);
  BOOST_TEST_REQUIRE(r.size() == 1u, "request " << tag << " got " << r.size() << " replies");
  return r.front();
}

job_stream harness::stream(const std::string& id, bool must_end) const {
  job_stream s;
  uint64_t next_seq = 0;
  for (const auto& p : log.events) {
    if (!p.logged || p.job_id != id) continue;
    const json& e = p.event;
    const std::string kind = e.value("kind", "");
    const bool terminal = kind == "done" || kind == "error";
    BOOST_TEST_CONTEXT("job " << id << ", event " << e.dump()) {
      BOOST_TEST(s.terminal.is_null(), "an event after the terminal one");
      BOOST_TEST(e.value("id", "") == id);
      BOOST_TEST(e.value("seq", uint64_t(1) << 62) == next_seq);
      if (next_seq == 0) BOOST_TEST(kind == "accepted");
      BOOST_TEST(p.terminal == terminal);
    }
    if (kind == "tokens") {
      ++s.tokens_events;
      for (const auto& t : e.at("token_ids")) s.token_ids.push_back(t.get<token_id>());
      s.text += e.value("text", "");
    }
    if (terminal) s.terminal = e;
    s.events.push_back(e);
    ++next_seq;
  }
  if (must_end) BOOST_TEST(!s.terminal.is_null(), "job " << id << " has no terminal event");
  return s;
}

std::vector<json> harness::unlogged(const std::string& id) const {
  std::vector<json> out;
  for (const auto& p : log.events)
    if (!p.logged && p.job_id == id) out.push_back(p.event);
  return out;
}

size_t harness::events_naming(const std::string& id) const {
  return static_cast<size_t>(std::count_if(log.events.begin(), log.events.end(), [&](const published& p) {
    return p.job_id == id || p.event.value("id", "") == id;
  }));
}

} // namespace conveyor::actor_test
