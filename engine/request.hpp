// Pure. What a submitted job carries into the scheduler, how a submit is answered, and why a
// sequence finished. Times are plain seconds on the caller's clock, passed in; the engine never
// reads a clock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/constraint.hpp"
#include "engine/job_types.hpp"
#include "engine/sampling_params.hpp"
#include "engine/types.hpp"

namespace conveyor {

/// When generation stops, token-wise. Stop strings need text and are checked by the request
/// actor, which then calls scheduler::finish(id, finish_reason::stop).
struct stop_params {
  /// Most output tokens. Default 16, >= 1.
  int32_t max_tokens = 16;
  /// EOS ids and stop token ids are ignored until this many output tokens exist. Default 0,
  /// in [0, max_tokens].
  int32_t min_tokens = 0;
  /// The model's end-of-sequence ids (from the tokenizer).
  std::vector<token_id> eos_token_ids;
  /// Further ids that end generation (the request's own).
  std::vector<token_id> stop_token_ids;
  /// Keep generating past EOS (benchmarks force output lengths this way).
  bool ignore_eos = false;

  /// Returns an empty string when valid, else a message naming the field and the allowed range.
  std::string validate() const;
};

/// One generation job as the scheduler sees it.
struct request {
  seq_id id = 0;
  std::vector<token_id> prompt_token_ids;
  sampling_params sampling;
  stop_params stop;
  /// Used by the `priority` policy: lower value runs first. Default 0.
  int32_t priority = 0;
  /// When the job arrived, in seconds on the caller's clock (orders ties under `priority`).
  double arrival_time_s = 0.0;
  /// The job finishes with reason `deadline` once `now_s >= deadline_s`, waiting or running.
  std::optional<double> deadline_s;
  /// A job resumed after a restart: the last `resumed_output` prompt tokens are output it had
  /// published before (job_table::resume_request); its usage counts them as output.
  int32_t resumed_output = 0;
  /// Prompt logprobs (vLLM's prompt_logprobs): when >= 0, each prompt token after the first is
  /// scored (its logprob given the tokens before it, under the raw distribution) with this many
  /// most likely alternatives, in [0, max_top_logprobs]; the scores arrive with the first output
  /// token. Such a job's prompt is computed whole (no prefix-cache hit). -1: none.
  int32_t prompt_logprobs = -1;
  /// Structured outputs: only what this constraint allows is drawn, and the sequence ends (stop)
  /// once it is complete. Null: free text. It must have seen every output token so far.
  std::shared_ptr<token_constraint> constraint;
  /// Speculative decoding may draft for this job when the server has it on (it never changes
  /// the output, only the speed); false opts the job out.
  bool speculate = true;
};

/// Why a sequence stopped.
enum class finish_reason {
  /// An EOS id, a stop token id, or (through finish()) a stop string.
  stop,
  /// max_tokens output tokens, or max_model_len tokens in all.
  length,
  /// cancel() was called.
  cancelled,
  /// Its deadline passed, waiting or running.
  deadline,
};

const char* to_string(finish_reason reason);

/// The answer to submit(): accepted, or rejected with a reason and a readable message.
struct submit_result {
  bool accepted = true;
  /// overloaded (the queue is at max_num_queued_reqs or max_num_queued_tokens: retry later),
  /// bad_request (empty prompt, bad stop or sampling parameters), too_long (the prompt leaves no
  /// room for one output token within max_model_len: the one prompt-length rule), duplicate (a
  /// job with this seq id is live).
  error_code reason = error_code::overloaded;
  std::string message;
};

} // namespace conveyor
