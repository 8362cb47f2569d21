// Pure. The continuous-batching scheduler: waiting queue, running set, KV blocks, preemption,
// deadlines, bounded queue, stop checks. Value in, value out; it never reads a clock (every
// call that needs the time takes `now_s`) and draws no random numbers.
//
// One iteration (the caller's loop):
//
//   plan   = sched.schedule(now)        // running first, then admit waiting prompts
//   result = executor.step(plan)        // skipped when plan.seqs is empty
//   events = sched.update(result, now)  // tokens appended, stop checks, finished jobs freed
//
// Pipelined (async scheduling, the loop for an executor whose submit() does not wait): schedule()
// may be called once more while one step is in flight, and update() takes results in plan order:
//
//   A = schedule(); submit(A); B = schedule(); submit(B); update(collect());   // A's result
//   C = schedule(); submit(C); update(collect());  /* B's */  ...
//
// B continues every sequence of A as if A were done: a decode whose token A is still sampling
// carries k_previous_sample. Not continued ahead: a sequence with a grammar (its mask needs the
// token) and one that A's token ends by length (max_tokens, max_model_len). A sequence that A's
// token ends otherwise (EOS, a stop token, a stop string, a cancel) has computed one token in B
// for nothing: B's token is dropped (vLLM's async scheduling makes the same trade). Blocks freed
// while a step is in flight may be written by it: executors run steps in submit order, so the
// next owner's writes come after.
//
// Speculative decoding (scheduler_spec.cpp, engine/speculation.hpp): once a step is planned, decodes
// may get drafted tokens from the budget and blocks left over; update() keeps the sampled tokens
// that match them, so one update() may append several tokens to a sequence. A drafted sequence is
// not planned ahead (how many of its drafts stand is unknown until its step is done).
//
// Events: every finish is reported exactly once. update() returns its own events together with
// any that happened since the last call; finishes outside a step (cancel(), finish(), a
// deadline found by schedule(), a deadline already past at submit()) wait in an outbox that the
// next update() or take_events() empties, whichever comes first.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/config.hpp"
#include "engine/kv_cache_manager.hpp"
#include "engine/request.hpp"
#include "engine/sequence.hpp"
#include "engine/step.hpp"
#include "engine/waiting_queue.hpp"

namespace conveyor {

enum class event_kind {
  /// A token was appended to the sequence's output.
  token,
  /// The sequence finished; its blocks are free and its id may be reused.
  finished,
};

/// One thing that happened to one sequence.
struct seq_event {
  event_kind kind = event_kind::token;
  seq_id id = 0;
  /// kind == token: the new token and its logprob.
  token_id token = 0;
  float logprob = 0.0f;
  std::vector<token_logprob> top;
  /// kind == token, the sequence's first with prompt logprobs asked for: entry p scores the
  /// prompt token at position p + 1 (request::prompt_logprobs).
  std::optional<std::vector<sampled_token>> prompt;
  /// kind == finished: why, and the job's usage.
  finish_reason reason = finish_reason::stop;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  /// Prompt tokens served from the prefix cache at first admission.
  int32_t num_cached_tokens = 0;
};

/// A snapshot for metrics and the `stats` op.
struct scheduler_stats {
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  /// Tokens of the waiting jobs (what max_num_queued_tokens limits).
  int64_t num_queued_tokens = 0;
  int32_t num_kv_blocks = 0;
  int32_t num_kv_blocks_used = 0;
  int32_t num_kv_blocks_free = 0;
  /// Running sequences' tokens in the KV cache, and the slots of their block tables
  /// (table blocks x block_size); their ratio is the KV utilisation.
  int64_t num_live_kv_tokens = 0;
  int64_t num_allocated_kv_slots = 0;
  int64_t num_preemptions = 0;
  /// Prompt tokens looked up in the prefix cache at first admission, and those found.
  int64_t num_prefix_query_tokens = 0;
  int64_t num_prefix_hit_tokens = 0;
  /// Speculative decoding (vLLM's spec_decode counters): verifications of one sequence's drafts,
  /// tokens drafted, tokens accepted, and tokens accepted at each draft position (0-based).
  int64_t num_spec_drafts = 0;
  int64_t num_spec_draft_tokens = 0;
  int64_t num_spec_accepted_tokens = 0;
  std::vector<int64_t> num_spec_accepted_per_pos;
};

class scheduler {
public:
  /// `num_kv_blocks` is derived at start-up from the memory budget. The configuration must pass
  /// validate_engine_config(); a failing one is a caller bug and aborts.
  scheduler(const scheduler_config& sched, const cache_config& cache, int32_t num_kv_blocks);
  ~scheduler();

  /// Queues a job. Rejects it (nothing changes) when the queue is at its bounds (`overloaded`),
  /// when it can never run (`invalid`: empty prompt, prompt longer than max_model_len, bad
  /// stop or sampling parameters) or when its id is live (`duplicate_id`). A job whose deadline
  /// is already past at `now_s` is accepted and finishes at once with reason `deadline`.
  submit_result submit(request req, double now_s);
  /// Ends a job with reason `cancelled` and frees its blocks at once. Idempotent: returns false,
  /// and reports nothing, when the id is not live.
  bool cancel(seq_id id);
  /// Ends a job with the given reason, as cancel() does; the request actor's hook for stop
  /// strings (reason `stop`). Returns false when the id is not live.
  bool finish(seq_id id, finish_reason reason);

  /// Expires deadlines, then plans one step: running sequences first (their next prompt chunk
  /// or one decode token, preempting by recompute when blocks run out), then waiting prompts
  /// while the token budget, max_num_seqs and the KV blocks allow (chunking the last one).
  /// At most one non-empty plan may be awaiting its update() (pipelining, see the file comment).
  step_plan schedule(double now_s);
  /// Applies the executor's result for the oldest non-empty plan not yet updated: advances
  /// computed tokens, fills the prefix cache, appends sampled tokens and runs stop checks.
  /// Returns every event not yet reported (see the file comment).
  std::vector<seq_event> update(const step_result& result, double now_s);
  /// Events not yet reported (finishes outside a step).
  std::vector<seq_event> take_events();

  /// True while any job is waiting or running.
  bool has_unfinished() const { return !seqs_.empty(); }
  /// True between a non-empty schedule() and its update().
  bool step_in_flight() const { return !in_flight_.empty(); }
  /// Non-empty plans awaiting their update() (0, 1, or 2 while pipelining).
  int32_t num_steps_in_flight() const { return static_cast<int32_t>(in_flight_.size()); }
  /// The live sequence with this id, or nullptr.
  const sequence* find(seq_id id) const;
  scheduler_stats stats() const;
  /// Jobs waiting for admission (stats().num_waiting without the walk over the running ones).
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  const kv_cache_manager& kv() const { return kv_; }
  const scheduler_config& config() const { return cfg_; }

  /// The KV manager's invariants plus: each live sequence is in exactly one of waiting and
  /// running, the running set respects max_num_seqs, running tables cover their computed
  /// tokens, waiting ones hold no blocks, and the counters agree. Returns "" or the violation.
  std::string check_invariants() const;

private:
  struct chosen_seq {
    sequence* seq;
    int32_t num_new;
    std::vector<token_id> drafts;  // the last drafts.size() of num_new (speculative decoding)
  };
  struct in_flight_seq {
    sequence* seq;
    seq_id id;
    int32_t num_new;
    bool sample;
    bool live;
    int32_t epoch;  // seq->num_preemptions when planned: a later preemption voids the KV work
    int32_t begin = 0;       // the chunk's first position
    int32_t num_scored = 0;  // its prompt targets (prompt logprobs)
    std::vector<token_id> drafts;  // verified by this step
  };
  struct flight {
    uint64_t step_id = 0;
    std::vector<in_flight_seq> seqs;
  };

  // scheduler.cpp: planning.
  void schedule_running(int32_t& budget, bool& preempted);
  void admit_waiting(int32_t& budget);
  void admit_static(int32_t& budget);
  bool try_admit(sequence* seq, int32_t& budget, int32_t num_reserved_slots);
  bool continues_ahead(const sequence& seq) const;
  sequence* pick_victim() const;
  void preempt(sequence* victim, int32_t& budget);
  step_plan build_plan();
  // scheduler_spec.cpp: speculative decoding.
  void add_drafts(int32_t& budget);
  bool may_draft(const sequence& seq, const chosen_seq& c) const;
  bool holds_for_drafts(const sequence& seq) const;
  int32_t keep_verified(const in_flight_seq& f, std::span<const sampled_token> sampled);
  // scheduler_lifecycle.cpp: submit, finish, update.
  void expire_deadlines(double now_s);
  void retire(sequence* seq, finish_reason reason);
  void remove_live(sequence* seq, finish_reason reason);
  void forget_in_flight(const sequence* seq);
  bool append_token(sequence* seq, const sampled_token& sampled, bool& any_finished);
  void apply(const in_flight_seq& f, std::span<const sampled_token> sampled, std::span<const sampled_token> scores, bool& any_finished);

  scheduler_config cfg_;
  cache_config cache_cfg_;
  kv_cache_manager kv_;
  int32_t watermark_blocks_ = 0;

  std::unordered_map<seq_id, std::unique_ptr<sequence>> seqs_;
  waiting_queue waiting_;
  std::vector<sequence*> running_;
  std::set<std::pair<double, seq_id>> deadlines_;
  std::vector<seq_event> outbox_;
  std::vector<chosen_seq> chosen_;
  std::deque<flight> in_flight_;

  uint64_t next_serial_ = 0;
  uint64_t next_step_id_ = 1;
  int64_t num_queued_tokens_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_prefix_query_tokens_ = 0;
  int64_t num_prefix_hit_tokens_ = 0;
  int64_t num_spec_drafts_ = 0, num_spec_draft_tokens_ = 0, num_spec_accepted_tokens_ = 0;
  std::vector<int64_t> num_spec_accepted_per_pos_;
  std::vector<token_id> proposal_;  // scratch
  /// Static batching: live members of the batch now running (0: the next batch may form).
  int32_t static_batch_size_ = 0;
};

} // namespace conveyor
