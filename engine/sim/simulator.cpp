#include "engine/sim/simulator.hpp"

#include <algorithm>

#include "engine/check.hpp"
#include "engine/scheduler.hpp"

namespace conveyor::sim {

std::string sim_config::validate() const {
  if (auto e = validate_engine_config(sched, cache, num_kv_blocks); !e.empty()) return e;
  return cost.validate();
}

sim_result run_simulation(const sim_config& cfg, const std::vector<sim_request>& requests) {
  const std::string error = cfg.validate();
  CONVEYOR_ASSERT(error.empty(), error.c_str());
  conveyor::scheduler sched(cfg.sched, cfg.cache, cfg.num_kv_blocks);
  sim_result out;
  out.requests.resize(requests.size());
  double now = 0.0;
  double weighted_util = 0.0;
  double weighted_running = 0.0;
  double util_time = 0.0;
  size_t next = 0;

  const auto record = [&](const std::vector<seq_event>& events, double t) {
    for (const seq_event& e : events) {
      request_record& r = out.requests[e.id];
      if (e.kind == event_kind::token) {
        if (r.first_token_s < 0.0) r.first_token_s = t;
      } else {
        r.finish_s = t;
        r.num_output_tokens = e.num_output_tokens;
        r.reason = e.reason;
        out.end_s = std::max(out.end_s, t);
      }
    }
  };

  for (;;) {
    for (; next < requests.size() && requests[next].arrival_s <= now; ++next) {
      const sim_request& in = requests[next];
      request req;
      req.id = next;
      req.prompt_token_ids = in.prompt;
      req.stop.max_tokens = in.output_len;
      req.stop.ignore_eos = true;
      req.arrival_time_s = in.arrival_s;
      request_record& r = out.requests[next];
      r.arrival_s = in.arrival_s;
      r.num_prompt_tokens = static_cast<int32_t>(in.prompt.size());
      r.rejected = !sched.submit(std::move(req), now).accepted;
    }
    const step_plan plan = sched.schedule(now);
    record(sched.take_events(), now);
    if (plan.seqs.empty()) {
      if (next < requests.size()) {
        now = std::max(now, requests[next].arrival_s);
        continue;
      }
      CONVEYOR_ASSERT(!sched.has_unfinished(), "jobs left that the scheduler never plans");
      break;
    }
    const double dt = cfg.cost.step_s(plan);
    now += dt;
    step_result result;
    result.step_id = plan.step_id;
    for (const scheduled_seq& s : plan.seqs)
      if (s.sample) result.sampled.push_back({s.id, /*token=*/1, /*logprob=*/0.0f, {}});
    record(sched.update(result, now), now);

    ++out.num_steps;
    out.num_batched_tokens += plan.num_tokens();
    const scheduler_stats st = sched.stats();
    if (st.num_allocated_kv_slots > 0) {
      weighted_util += dt * static_cast<double>(st.num_live_kv_tokens) /
                       static_cast<double>(st.num_allocated_kv_slots);
      util_time += dt;
    }
    weighted_running += dt * static_cast<double>(plan.seqs.size());
    out.num_preemptions = st.num_preemptions;
  }
  out.kv_utilization = util_time > 0.0 ? weighted_util / util_time : 0.0;
  out.mean_running = now > 0.0 ? weighted_running / now : 0.0;
  return out;
}

} // namespace conveyor::sim
