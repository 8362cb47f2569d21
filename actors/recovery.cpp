#include "actors/recovery.hpp"

#include <limits>

#include "schemas/events.hpp"
#include "schemas/replay.hpp"

namespace conveyor::actors {
namespace {

[[noreturn]] void damaged(const std::string& path, const std::string& job_id, const std::string& what) {
  throw journal::journal_error("journal " + path + ": job '" + job_id + "' " + what +
                               "; move the file away (its jobs are then lost) or pass another --state-dir");
}

job_info info_of(const schemas::job_event& end) {
  job_info info;
  const auto* done = std::get_if<schemas::done_event>(&end);
  if (!done) {
    info.state = job_state::failed;
    return info;
  }
  info.reason = done->reason;
  info.state = done->reason == finish_reason::cancelled ? job_state::cancelled : job_state::finished;
  info.prompt_tokens = static_cast<int32_t>(done->usage.prompt_tokens);
  info.completion_tokens = static_cast<int32_t>(done->usage.completion_tokens);
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
      auto end = schemas::decode_event(j.events.back());
      if (!end || !schemas::is_terminal(*end)) damaged(path, j.job_id, "ended without a readable terminal event");
      plan.finished.push_back({j.job_id, info_of(*end), *j.ended_unix});
      continue;
    }
    std::vector<schemas::job_event> stored;
    for (const auto& ev : j.events) {
      auto e = schemas::decode_event(ev);
      if (!e) damaged(path, j.job_id, "has an unreadable event");
      stored.push_back(std::move(*e));
    }
    schemas::replayed replayed = schemas::replay(std::move(stored));
    if (replayed.end || replayed.after_gap > 0) damaged(path, j.job_id, "has an unreadable event");
    schemas::resume_point r = std::move(replayed.at);
    r.arrival_unix = j.arrival_unix;
    r.cancelled = j.cancelled;
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

schemas::published_event poison_event(const recovery_plan::poisoned_job& p, int32_t poison_after) {
  return schemas::published_event(schemas::error_event{
      p.job_id, p.next_seq, error_code::internal,
      "the job was running in " + std::to_string(p.crash_runs) + " consecutive crashes of the server (limit " +
          std::to_string(poison_after) + ", poison_after); it is not run again"});
}

} // namespace conveyor::actors
