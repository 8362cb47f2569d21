// One job's policy between the producer and the scheduler, without an actor: how its input
// becomes prompt tokens (chat template, vocabulary check) and its response_format a constraint;
// its seed; where a resumed job stands (the four-way verdict: cancelled, stopped by a stop string,
// grammar ended, or the job table's resume rule); its deadline; how tokens become numbered events
// (text deltas that never split a UTF-8 character nor show a stop string); its usage after a stop
// string; its timings; what a resume the job table refused becomes. The request actor
// (request_actor.cpp) only moves these values between the session, the scheduler, the publisher
// and the producer. Deterministic (the caller passes the clock and the fallback seed), so its
// rules are tested as tables (tests/actors/job_session_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "actors/messages.hpp"
#include "actors/metrics.hpp"
#include "model/text/chat_template.hpp"
#include "model/text/grammar.hpp"
#include "model/text/text_stream.hpp"
#include "model/text/tokenizer.hpp"
#include "schemas/events.hpp"
#include "schemas/replay.hpp"
#include "schemas/requests.hpp"

namespace conveyor::actors {

/// What a session reads (all thread-safe, all outliving it; null chat or grammars: refused).
struct session_models {
  const model::tokenizer* tok = nullptr;
  const model::chat_template* chat = nullptr;
  const model::grammar_compiler* grammars = nullptr;
};

/// The prompt tokens of a job's input: its text encoded, its token ids checked against the
/// vocabulary, or its messages rendered by the chat template (with `kwargs`, which only messages
/// take) and encoded; or why it cannot run. (Its length is the job table's rule.) Also the HTTP
/// /tokenize answer.
std::variant<std::vector<token_id>, refusal> prompt_tokens(const schemas::prompt_input& input, const session_models& m,
                                                           const model::template_kwargs& kwargs = {});

class job_session {
public:
  /// `arrival_s` on the runtime's clock; `fallback_seed` is the job's seed when it names none
  /// (stored with it, so a resumed job samples on with the same one). With `resume`, the job
  /// continues from its stored events: their output is replayed into its text.
  job_session(schemas::submit_request job, double arrival_s, const session_models& m, std::optional<schemas::resume_point> resume,
              uint64_t fallback_seed);

  const schemas::submit_request& job() const { return job_; }
  bool resumed() const { return resume_.has_value(); }

  /// What the scheduler gets, and for a resumed job whose output was complete before the crash,
  /// the end to record at once (`ended`: the submission then only records it).
  struct submit_plan {
    submission sub;
    std::optional<job_end> ended;
  };
  submit_plan plan_submit(double now_s);

  /// The `accepted` event (seq 0), once the scheduler admitted a new job.
  schemas::published_event accepted();

  /// What a batch of new tokens gives: the tokens event to publish (none while a stop string may
  /// still start in the text, or when the job does not stream), whether a stop string matched
  /// (the scheduler is told), and the inter-token gaps for the histogram.
  struct tokens_result {
    std::optional<schemas::published_event> event;
    bool stop_matched = false;
    std::vector<double> itl_gaps;
  };
  tokens_result on_tokens(const token_batch& b);

  /// What the job's end gives: its last events in order (a final tokens event, then done or
  /// error) and what the metrics count.
  struct end_result {
    std::vector<schemas::published_event> events;
    bool failed = false;
    finish_reason reason = finish_reason::stop;  ///< when not failed
    request_latencies latencies;                 ///< when not failed
  };
  end_result on_end(const job_end& end, double now_s);

  /// A resumed job the job table refused: nothing when the server is shutting down (the next
  /// start resumes it), a `length` end when prompt and output reach max_model_len, else an error.
  std::optional<end_result> on_resume_refused(const refusal& why, double now_s);

private:
  std::optional<schemas::published_event> take_tokens_event(bool final);
  job_end resumed_end(finish_reason reason, double now_s) const;
  template <class Event>
  schemas::published_event next_event(Event ev);

  schemas::submit_request job_;
  double arrival_s_ = 0.0;
  session_models m_;
  std::optional<schemas::resume_point> resume_;
  std::unique_ptr<model::text_stream> text_;
  uint64_t next_seq_ = 0;
  std::vector<token_id> pending_ids_;
  std::vector<float> pending_logprobs_;
  std::vector<std::vector<token_logprob>> pending_top_;
  std::vector<token_id> prompt_ids_;  // with prompt logprobs: the prompt, for the first tokens event
  std::optional<schemas::prompt_scores> pending_prompt_;
  bool prompt_out_ = false;           // the first tokens event went out
  double last_token_s_ = -1.0;
  int32_t tokens_taken_ = 0;    // output tokens pushed into the text, up to a stop string
  int32_t resumed_tokens_ = 0;  // output tokens published before the restart
  int32_t prompt_len_ = 0;      // the job's own prompt tokens
};

} // namespace conveyor::actors
