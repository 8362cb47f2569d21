// Pure. The job lifecycle around the scheduler: the producer's job ids and the scheduler's seq
// ids, each job's state and timestamps, the memory of finished ids, admission (duplicate,
// draining, the one prompt-length rule), and flow control of each job's tokens on the event
// path. The actor shell calls it and delivers the outputs it returns; it holds no rule itself.
//
//   submit ──▶ queued ──schedule──▶ running ──update: stop/length──▶ finished
//                 │                    │  cancel / deadline ────────▶ cancelled / finished
//                 └────────────────────┴─ fail_all (executor died) ─▶ failed
//
// Outputs, in the order they must be delivered (per job: tokens before its end):
//   tokens   a batch of a job's new tokens; at most one batch per job is unacknowledged.
//            Tokens made meanwhile wait and go out when on_published() acknowledges the last
//            batch, or at once (without waiting) just before the job's end.
//   finished the job ended, exactly once, with its usage and timestamps.
#pragma once

#include <deque>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "engine/job_types.hpp"
#include "engine/scheduler.hpp"

namespace conveyor {

/// The moments vLLM keeps on a request (RequestStateStats), in seconds on the caller's clock;
/// < 0 while not reached. Recorded by submit / schedule / update / the finish.
struct job_times {
  double arrival_s = -1.0;          ///< the intake received it (the request's arrival_time_s)
  double queued_s = -1.0;           ///< accepted into the queue
  double first_scheduled_s = -1.0;  ///< first in a step's plan
  double first_token_s = -1.0;      ///< first output token appended
  double last_token_s = -1.0;       ///< latest output token appended
  double finished_s = -1.0;         ///< ended
};

/// A job's new tokens, each with the time update() appended it.
struct token_batch {
  std::vector<token_id> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<token_logprob>> top;  ///< per token; empty entries when none were asked for
  std::vector<double> times_s;
  /// The job's first batch, when it asked for prompt logprobs: entry p scores prompt token p + 1.
  std::optional<std::vector<sampled_token>> prompt;
};

/// How a job ended.
struct job_end {
  job_state state = job_state::finished;
  finish_reason reason = finish_reason::stop;  ///< meaningless when state == failed
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  job_times times;
  std::string error;  ///< state == failed: what failed
};

/// One thing the shell must deliver to a job's request actor.
struct job_output {
  enum class kind { tokens, finished };
  kind what = kind::tokens;
  seq_id id = 0;
  token_batch tokens;  ///< what == tokens
  job_end end;         ///< what == finished
};

/// Where a job is, for `status` and `cancel`.
struct job_info {
  job_state state = job_state::queued;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  std::optional<finish_reason> reason;  ///< once ended with a finish reason
};

class job_table {
public:
  /// `max_remembered`: finished ids kept for duplicate refusal and `status` (oldest forgotten);
  /// `retention_s`: and for at most this long after they ended (forget_expired), as their events.
  job_table(const scheduler_config& sched, const cache_config& cache, int32_t num_kv_blocks, size_t max_remembered,
            double retention_s = std::numeric_limits<double>::infinity());
  /// Forgets finished ids that ended more than the retention period before `now_s` (the
  /// protocol: after it an id may be reused).
  void forget_expired(double now_s);
  ~job_table();

  /// Admits a job or refuses it. Checked in order: a known id (live or remembered) is
  /// `duplicate` whatever else is wrong with the job (so nothing about it reaches that job's
  /// topic); draining is `shutting_down`; then `refused` (what the caller found before, e.g. a
  /// prompt that did not tokenize) is returned as is; then the scheduler's own checks
  /// (too_long, bad_request, overloaded). `req.arrival_time_s` is the arrival.
  std::variant<seq_id, refusal> submit(const std::string& job_id, request req, const std::optional<refusal>& refused,
                                       double now_s, bool resume = false);

  // Restart (the journal): before any submit, the runtime tells the table what the last
  // incarnation left. A finished job is remembered (duplicate, status); an unfinished one is
  // either resumed (its id reserved: refused as duplicate until its own resume submit) or, when
  // it was running in `poison_after` consecutive crashes, ended as failed.
  void restore_finished(const std::string& job_id, job_info info, double ended_s) { remember(job_id, info, ended_s); }
  void reserve(const std::string& job_id) { reserved_.insert(job_id); }
  /// A resumed job whose output was complete before the crash (its terminal event was lost):
  /// it ends as `info` without running.
  void end_resumed(const std::string& job_id, job_info info, double now_s);
  /// Whether a job running in `crash_runs` consecutive crashes is a poison job (0: never).
  static bool is_poison(int32_t crash_runs, int32_t poison_after) { return poison_after > 0 && crash_runs >= poison_after; }
  /// Turns a journaled job's request into its continuation: the output it had published is
  /// appended to its prompt (recomputed; the prefix cache helps) and counts against max_tokens
  /// and min_tokens. Returns why it had ended when nothing is owed (its terminal event was
  /// lost: end it with end_resumed), else nullopt.
  static std::optional<finish_reason> resume_request(request& req, const std::vector<token_id>& published);
  /// Job ids scheduled for the first time since the last call (the journal marks them running
  /// before their first step).
  std::vector<std::string> take_first_scheduled();
  /// Cancels a live job (it ends with reason cancelled). Returns the job's state afterwards,
  /// nullopt when the id is unknown.
  std::optional<job_state> cancel(const std::string& job_id, double now_s);
  /// A stop string matched in the job's text: end it with reason stop (ignored when not live).
  void finish_stop(seq_id id, double now_s);
  /// Ends every live job with an error (the executor failed); later submits are refused.
  void fail_all(const std::string& why, double now_s);
  /// Stops admitting (shutting_down). drained() is true once no job is live.
  void begin_drain() { draining_ = true; }
  bool draining() const { return draining_; }
  bool drained() const { return live_.empty(); }
  /// Cancels every live job (the end of a drain's grace period).
  void cancel_all(double now_s);

  /// The scheduler's plan for the next step; records first_scheduled times.
  step_plan schedule(double now_s);
  /// Applies a step's result: tokens and finishes become outputs.
  void update(const step_result& result, double now_s);
  /// The event made of a job's last token batch is out: its waiting tokens may go.
  void on_published(seq_id id);
  /// Outputs to deliver, in order; empties the outbox.
  std::vector<job_output> take_outputs();

  std::optional<job_info> status(const std::string& job_id) const;
  /// The job id of a live sequence, or nullptr.
  const std::string* job_id_of(seq_id id) const;
  bool has_unfinished() const { return sched_.has_unfinished(); }
  bool step_in_flight() const { return sched_.step_in_flight(); }
  /// Counters and gauges; `now_s` advances the tokens_per_s interval.
  serving_stats stats(double now_s);
  const scheduler& sched() const { return sched_; }

private:
  struct live_job {
    std::string job_id;
    job_times times;
    bool in_flight = false;  // a tokens output is not yet acknowledged
    token_batch pending;
    int32_t resumed_output = 0;  // output published before a restart, now prompt (usage moves it back)
  };

  std::variant<seq_id, refusal> admit(const std::string& job_id, request req, const std::optional<refusal>& refused, double now_s);
  void drain_scheduler_events(std::vector<seq_event> events, double now_s);
  void emit_tokens(seq_id id, live_job& job);
  void end_job(seq_id id, job_end end);
  void remember(const std::string& job_id, job_info info, double ended_s);

  scheduler sched_;
  size_t max_remembered_;
  double retention_s_;
  bool draining_ = false, failed_ = false;
  seq_id next_id_ = 1;
  std::unordered_map<seq_id, live_job> live_;
  std::unordered_map<std::string, seq_id> by_job_;
  std::unordered_map<std::string, job_info> finished_;
  std::unordered_set<std::string> reserved_;
  std::vector<std::string> first_scheduled_;
  std::deque<std::pair<double, std::string>> finished_order_;  // (ended, id), in order of remembering
  std::vector<job_output> outbox_;
  serving_stats counters_;
  double rate_since_s_ = -1.0;
  int64_t rate_since_tokens_ = 0;
};

} // namespace conveyor
