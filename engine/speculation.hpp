// Pure. Speculative decoding's policy: the settings (vLLM's --speculative-config names), the
// n-gram proposer (prompt lookup) and the rule that sizes each sequence's drafts.
//
// A drafted step verifies k proposed tokens of a decoding sequence in one pass: its tokens are
// [last token, d1 .. dk] and the executor samples every one of those k+1 rows, each with the
// coin of its own position. Sampled tokens t0 .. tk; t0 always stands, and t(i) stands while
// d(i) == t(i-1): the accepted tokens are exactly those non-speculative decoding would have
// drawn, because a row's logits do not depend on the other rows of the step (batch-invariant
// kernels) and a draw depends on (logits, seed, position) alone.
//
//   tokens  ... a  b  c | c' d1 d2 d3        c' = the last sampled token, computed now
//   sampled             | t0 t1 t2 t3        t0 == d1, t1 == d2, t2 != d3
//   kept                | t0 t1 t2           KV kept for c' d1 d2; d3's slot is rewritten later
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/constraint.hpp"
#include "engine/ngram_index.hpp"
#include "engine/types.hpp"

namespace conveyor {

enum class spec_method {
  /// No speculation.
  none,
  /// Prompt lookup: the sequence's newest n-gram, found earlier in prompt + output, proposes
  /// the tokens that followed it there.
  ngram,
  /// A second, smaller model with the same vocabulary drafts greedily (draft_proposer).
  draft_model,
};

/// The draft model behind spec_method::draft_model, implemented outside engine/
/// (model/cpu/draft_model.hpp). Used by the scheduler's thread only.
class draft_proposer {
public:
  virtual ~draft_proposer() = default;
  /// Up to `k` tokens the draft model expects after `tokens` (a sequence's prompt and output so
  /// far), written to `out` (cleared); returns their number (0: none, e.g. its memory is full).
  virtual int32_t propose(seq_id id, std::span<const token_id> tokens, int32_t k, std::vector<token_id>& out) = 0;
  /// The sequence has ended: whatever the proposer keeps for it may go (the id may come back).
  virtual void release(seq_id id) = 0;
};

const char* to_string(spec_method m);
std::optional<spec_method> parse_spec_method(const std::string& text);

struct speculative_config {
  spec_method method = spec_method::none;
  /// Most tokens drafted per sequence and step (draft_budget decides how many of them). Default
  /// 8, in [1, 16].
  int32_t num_speculative_tokens = 8;
  /// The n-gram sizes tried, longest first. Defaults 1 and 5, 1 <= min <= max <= 16.
  int32_t prompt_lookup_min = 1;
  int32_t prompt_lookup_max = 5;
  /// The executor's cost model: a step of T tokens costs about (fixed_cost_tokens + T) token
  /// rows, so drafting pays while the batch is small next to this and stops as a step becomes
  /// compute-bound (see draft_budget). Set at start-up from the executor (0: the executor's
  /// estimate), > 0 when set.
  double fixed_cost_tokens = 0.0;
  /// draft_model: the draft model's file or name (as --model takes), and the proposer loaded
  /// from it at start-up (null until then; the scheduler needs it).
  std::string model;
  std::shared_ptr<draft_proposer> draft;

  bool enabled() const { return method != spec_method::none; }
  /// "" when valid, else a message naming the field, its value and the allowed range.
  std::string validate() const;
};

/// fixed_cost_tokens when neither the operator nor the executor sets one: a CPU step over a
/// 135M-parameter model (docs/benchmarks.md, speculative decoding: `step-bench --drafts` gives
/// one sequence's steps of 1 / 4 / 10 rows = 10.4 / 15.7 / 23.9 ms at context 64, about
/// 9 + 1.5 per row, F about 6; at context 600, 11.5 / 18.3 / 30.0, F about 4.6). 6 beat 4 in
/// each of four paired grounded runs (1 and 4 jobs at once, by 4-23%).
inline constexpr double default_fixed_cost_tokens = 6.0;

/// A sequence's record of its verified drafts: decayed counts of drafted tokens that were
/// accepted and of those that were reached (accepted, or the first one rejected), whose ratio
/// estimates the chance that one more drafted token is accepted.
struct spec_history {
  double accepted = 0.0;
  double reached = 0.0;
  /// Steps since its last verified draft (a sequence that stopped drafting tries again).
  int32_t idle_steps = 0;

  /// The estimate, starting from 1/2 with a weight of two drafts.
  double accept_rate() const { return (accepted + 1.0) / (reached + 2.0); }
  /// Folds in one verification: `num_accepted` of `num_drafted` drafts stood.
  void record(int32_t num_drafted, int32_t num_accepted);
};

/// How much each record counts against the next (older verifications fade).
inline constexpr double spec_history_decay = 0.8;
/// A sequence that has not drafted for this many steps may draft one token again, whatever its
/// record says, so a sequence whose text turns repetitive is noticed.
inline constexpr int32_t spec_retry_steps = 16;

/// The most tokens worth drafting for one sequence, at most `cap`: draft i (1-based) is
/// accepted with probability p^i, p = its accept_rate(), and pays when that beats `threshold`,
/// the output a token row buys in the step's decodes without drafts (outputs / cost in rows:
/// num_sampling / (fixed_cost_tokens + num_sampling)). A step of one decode on a CPU (threshold
/// 1/7) drafts while p^i > 0.14; a batch of 32 (about 0.84) only near-certain drafts.
///
/// Prompt chunks in the step are left out: they would lower the threshold (rows without output)
/// just when the step is compute-bound and a drafted row costs all its compute; and what they
/// buy (a prompt's progress) a rejected draft delays. Measured with new prompts every job, where
/// steps carry other jobs' prompt chunks (docs/benchmarks.md, speculative decoding).
int32_t draft_budget(const spec_history& h, int32_t cap, double threshold);
double draft_threshold(double fixed_cost_tokens, int32_t num_sampling);

/// Prompt lookup: for n from max_n down to min_n, the newest n tokens of `tokens` are searched
/// for earlier in `tokens` (the suffix itself excluded); at the first n with any occurrence,
/// those occurrences propose what followed them, the latest one's tokens in order, as long as
/// they agree: a token is proposed while at least 3/5 of the occurrences that proposed every
/// token before it (and reach that far) have it, and a match of n tokens proposes at most 2n.
/// Writes up to `k` tokens to `out` (cleared) and returns their number, 0 when nothing matched
/// or the occurrences disagree at once.
///
/// Why the vote and the cap: a draft that is rejected costs a row of the verification step and
/// buys nothing, and where earlier occurrences of the suffix went on differently, or the suffix
/// is one or two tokens long, the text is less likely to repeat. Replayed on 50 grounded jobs'
/// greedy outputs (scripts/spec_replay.py, which mirrors this rule and draft_budget: change them
/// together), the vote and the cap draft 19% fewer tokens for as many accepted (docs/benchmarks.md).
inline constexpr int64_t ngram_vote_num = 3, ngram_vote_den = 5;
inline constexpr int64_t ngram_draft_per_match_token = 2;
///
/// `index` is the sequence's own (engine/ngram_index.hpp, brought up to `tokens` here): a step
/// costs the occurrences of the newest min_n tokens, not a scan of the sequence per n.
int32_t propose_ngram(ngram_index& index, std::span<const token_id> tokens, int32_t min_n, int32_t max_n, int32_t k,
                      std::vector<token_id>& out);
/// The same with an index built for the call (tests, one-off lookups).
int32_t propose_ngram(std::span<const token_id> tokens, int32_t min_n, int32_t max_n, int32_t k,
                      std::vector<token_id>& out);

/// Structured outputs: how many of `drafts`, in order, the grammar takes. A draft it refuses
/// could never stand (the verifying row's mask excludes it), and nothing follows a draft that
/// completes it. The grammar is left as it was (the drafts are tried, then rolled back).
int32_t grammar_prefix(token_constraint& g, std::span<const token_id> drafts);

} // namespace conveyor
