#include "actors/recovery.hpp"

#include <limits>

#include "schemas/events.hpp"
#include "schemas/stored.hpp"

namespace conveyor::actors {
namespace {

[[noreturn]] void damaged(const std::string& path, const std::string& job_id, const std::string& what) {
  throw journal::journal_error("journal " + path + ": job '" + job_id + "' " + what +
                               "; move the file away (its jobs are then lost) or pass another --state-dir");
}

job_info info_of(const schemas::event_summary& end) {
  job_info info;
  if (end.kind == "error") {
    info.state = job_state::failed;
    return info;
  }
  info.reason = end.reason;
  info.state = end.reason == finish_reason::cancelled ? job_state::cancelled : job_state::finished;
  info.prompt_tokens = static_cast<int32_t>(end.prompt_tokens);
  info.completion_tokens = static_cast<int32_t>(end.completion_tokens);
  return info;
}

} // namespace

recovery_plan plan_recovery(std::vector<journal::stored_job> jobs, int32_t poison_after, const std::string& path) {
  recovery_plan plan;
  schemas::decode_limits unlimited;  // it passed the limits of its day; today's may be lower
  unlimited.max_message_bytes = unlimited.max_array_len = unlimited.max_str_bytes = std::numeric_limits<uint32_t>::max();
  unlimited.max_messages = unlimited.max_stop_strings = unlimited.max_stop_bytes = unlimited.max_stop_token_ids = 1u << 30;
  for (auto& j : jobs) {
    if (j.ended_unix) {
      auto end = schemas::summarize_event(j.events.back());
      if (!end || !end->terminal()) damaged(path, j.job_id, "ended without a readable terminal event");
      plan.finished.push_back({j.job_id, info_of(*end), *j.ended_unix});
      continue;
    }
    resume_info r;
    r.next_seq = j.events.size();
    r.arrival_unix = j.arrival_unix;
    r.cancelled = j.cancelled;
    for (const auto& ev : j.events) {
      auto s = schemas::summarize_event(ev);
      if (!s || s->terminal()) damaged(path, j.job_id, "has an unreadable event");
      r.published.insert(r.published.end(), s->token_ids.begin(), s->token_ids.end());
    }
    if (job_table::is_poison(j.crash_runs, poison_after)) {
      plan.poisoned.push_back({j.job_id, r.next_seq, j.crash_runs});
    } else {
      auto decoded = schemas::decode_request(j.request, unlimited);
      auto* job = std::get_if<schemas::submit_request>(&decoded);
      if (!job) damaged(path, j.job_id, "has an unreadable request");
      plan.resumed.push_back({std::move(*job), std::move(r)});
    }
    plan.logs.emplace_back(j.job_id, std::move(j.events));
  }
  return plan;
}

schemas::wire_bytes poison_event(const recovery_plan::poisoned_job& p, int32_t poison_after) {
  schemas::error_event ev;
  ev.id = p.job_id;
  ev.seq = p.next_seq;
  ev.code = schemas::error_code::internal;
  ev.message = "the job was running in " + std::to_string(p.crash_runs) + " consecutive crashes of the server (limit " +
               std::to_string(poison_after) + ", poison_after); it is not run again";
  return schemas::encode(ev);
}

} // namespace conveyor::actors
