// Helpers shared by the engine tests: request builders and a fake executor that "generates" a
// fixed token for every sequence it is asked to sample.
#pragma once

#include <ostream>
#include <vector>

#include "engine/scheduler.hpp"

namespace conveyor {

// Printable enums for Boost.Test messages (found by argument-dependent lookup).
inline std::ostream& operator<<(std::ostream& os, finish_reason r) { return os << to_string(r); }
inline std::ostream& operator<<(std::ostream& os, error_code r) { return os << to_string(r); }
inline std::ostream& operator<<(std::ostream& os, scheduling_policy p) { return os << to_string(p); }
inline std::ostream& operator<<(std::ostream& os, batching_mode m) { return os << to_string(m); }
inline std::ostream& operator<<(std::ostream& os, spec_method m) { return os << to_string(m); }
inline std::ostream& operator<<(std::ostream& os, seq_status s) {
  switch (s) {
    case seq_status::waiting: return os << "waiting";
    case seq_status::running: return os << "running";
    case seq_status::finished: return os << "finished";
  }
  return os << "?";
}
inline std::ostream& operator<<(std::ostream& os, event_kind k) {
  return os << (k == event_kind::token ? "token" : "finished");
}

} // namespace conveyor

namespace conveyor::test {

/// A request whose prompt is `prompt_len` consecutive ids starting at `first_token`.
inline request make_request(seq_id id, int32_t prompt_len, int32_t max_tokens,
                            token_id first_token = 1000) {
  request r;
  r.id = id;
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt_token_ids.push_back(first_token + i);
  r.stop.max_tokens = max_tokens;
  return r;
}

/// The fake executor: samples `token` for every sequence with `sample`, in plan order, and
/// scores each prompt target with minus its position (and prompt_top alternatives 0, 1, ...).
inline step_result fake_step(const step_plan& plan, token_id token = 7) {
  step_result result;
  result.step_id = plan.step_id;
  for (const scheduled_seq& s : plan.seqs) {
    if (s.sample) result.sampled.push_back({s.id, token, -0.5f, {}});
    for (size_t i = 0; i < s.prompt_targets.size(); ++i) {
      sampled_token& t = result.prompt_scores.emplace_back();
      t.id = s.id;
      t.token = s.prompt_targets[i];
      t.logprob = -static_cast<float>(s.num_computed_tokens + static_cast<int32_t>(i) + 1);
      for (int32_t k = 0; k < s.prompt_top; ++k) t.top.push_back({k, -static_cast<float>(k)});
    }
  }
  return result;
}

struct step_outcome {
  step_plan plan;
  std::vector<seq_event> events;
};

/// schedule -> fake executor -> update, at time `now_s`.
inline step_outcome run_step(scheduler& sched, double now_s = 0.0, token_id token = 7) {
  step_outcome out;
  out.plan = sched.schedule(now_s);
  out.events = sched.take_events();
  if (!out.plan.seqs.empty()) {
    auto more = sched.update(fake_step(out.plan, token), now_s);
    out.events.insert(out.events.end(), more.begin(), more.end());
  }
  return out;
}

/// The plan's entry for `id`, or nullptr.
inline const scheduled_seq* find_in(const step_plan& plan, seq_id id) {
  for (const scheduled_seq& s : plan.seqs)
    if (s.id == id) return &s;
  return nullptr;
}

/// The ids in the plan, in plan order.
inline std::vector<seq_id> ids_of(const step_plan& plan) {
  std::vector<seq_id> ids;
  for (const scheduled_seq& s : plan.seqs) ids.push_back(s.id);
  return ids;
}

/// The finished events among `events`.
inline std::vector<seq_event> finished_in(const std::vector<seq_event>& events) {
  std::vector<seq_event> out;
  for (const seq_event& e : events)
    if (e.kind == event_kind::finished) out.push_back(e);
  return out;
}

} // namespace conveyor::test
