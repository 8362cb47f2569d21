// Pure. The values that cross between the scheduler and an executor: one step's plan and
// its result. There are no prefill or decode phases: a sequence contributes a number of
// tokens (a prompt chunk, or its one newest token) and says whether to sample after them.
//
//   block_table of a sequence (block_size = 4), positions 0..9 in use:
//     table[0] -> block 7 : pos 0..3
//     table[1] -> block 2 : pos 4..7
//     table[2] -> block 9 : pos 8..9 (+2 free slots)
//   token at position p lives in block table[p / block_size], slot p % block_size.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/constraint.hpp"
#include "engine/logit_edits.hpp"
#include "engine/sampling_params.hpp"
#include "engine/types.hpp"

namespace conveyor {

/// A token of a plan whose value is not known yet when the plan is made (pipelined steps, see
/// scheduler::schedule): the token this sequence samples in the step submitted just before this
/// one. Only ever the last (and only) token of a sequence that samples in that step; the
/// executor resolves it (the CUDA executor on the device, without waiting for the step).
inline constexpr token_id k_previous_sample = -1;

/// One sequence's share of a step.
struct scheduled_seq {
  seq_id id = 0;
  /// Tokens of this sequence already in the KV cache; `tokens[i]` sits at position
  /// num_computed_tokens + i.
  int32_t num_computed_tokens = 0;
  /// Tokens to compute this step: a prompt chunk, or the last sampled token (possibly
  /// k_previous_sample, when that token is still being sampled by the step before).
  std::vector<token_id> tokens;
  /// Every block of the sequence in order; covers num_computed_tokens + tokens.size() positions.
  std::vector<block_id> block_table;
  /// True when this chunk ends at the newest known token: sample the next one from its logits.
  bool sample = false;
  /// How to sample (used only when `sample`).
  sampling_params sampling;
  /// Structured outputs (set only when `sample`): the executor asks it for the tokens allowed
  /// next (token_constraint::fill_mask) right before drawing, and draws only among them; the
  /// engine advances it with the drawn token after the step. Null: any token.
  std::shared_ptr<token_constraint> constraint;
  /// logit_bias and penalties (set only when `sample` and sampling.edits_logits()): applied to
  /// the row's logits before the draw, ascending by token. Empty: the raw logits. They count the
  /// tokens through the newest known one; with drafts, the row after draft i also counts drafts
  /// 1..i as output (the executor extends a copy, extend_logit_edits).
  std::vector<logit_edit> logit_edits;
  /// Prompt logprobs (request::prompt_logprobs): row i of this chunk scores prompt_targets[i],
  /// the prompt token at position num_computed_tokens + i + 1, reporting prompt_top alternatives.
  /// Empty: no row is scored. At most tokens.size() entries.
  std::vector<token_id> prompt_targets;
  int32_t prompt_top = 0;
  /// Speculative decoding (engine/speculation.hpp): the last num_drafts tokens are proposed, not
  /// known. With `sample` set, the executor samples after each of the last num_drafts + 1 tokens,
  /// each row with its own position's coin, as if every draft before it were accepted; with a
  /// constraint, each row's mask is the grammar's after the drafts before it (the executor
  /// accepts them, fills the masks, then rolls them back; the engine proposes only drafts the
  /// grammar takes); with penalties, each row's edits count the drafts before it as output
  /// (engine/draft_rows.hpp has both rules).
  int32_t num_drafts = 0;
  /// The sequence's prompt length (a resumed job's earlier output included): the rows at
  /// positions before it are prompt rows, the others generated ones. A batch-invariant executor
  /// computes the two kinds on different kernels (docs/gpu.md §3); 0: every row a generated one.
  int32_t num_prompt_tokens = 0;
};

/// Everything the executor needs for one fused forward step.
struct step_plan {
  uint64_t step_id = 0;
  std::vector<scheduled_seq> seqs;

  /// Total tokens computed this step (the step's "batch size" in tokens).
  int32_t num_tokens() const {
    int32_t n = 0;
    for (const auto& s : seqs) n += static_cast<int32_t>(s.tokens.size());
    return n;
  }
};

/// A token and its log-probability (top-logprobs alternatives).
struct token_logprob {
  token_id token = 0;
  float logprob = 0.0f;
};

/// One sampled token.
struct sampled_token {
  seq_id id = 0;
  token_id token = 0;
  /// Natural log of the chosen token's probability under the unmodified distribution
  /// (softmax of the raw logits, before temperature and truncation).
  float logprob = 0.0f;
  /// The sampling.top_logprobs most likely tokens under that distribution, most likely first
  /// (ties: lower id first); empty when none were asked for.
  std::vector<token_logprob> top;
};

/// What one step produced.
struct step_result {
  uint64_t step_id = 0;
  /// One entry per sequence with `sample` (1 + num_drafts for a drafted one, row order), in
  /// plan order.
  std::vector<sampled_token> sampled;
  /// One entry per prompt target, in plan order (each sequence's rows in order): `token` is the
  /// target, `logprob` and `top` as for a sampled token.
  std::vector<sampled_token> prompt_scores;
};

/// The plan's prompt targets flattened for an executor: each one's token row in the step (the
/// plan's tokens in order), its number of alternatives, and the result entries to fill (id and
/// target set, logprob and alternatives left to the executor), in plan order.
struct prompt_rows {
  std::vector<int32_t> rows;
  std::vector<int32_t> tops;
  std::vector<sampled_token> scores;
};
prompt_rows prompt_rows_of(const step_plan& plan);

} // namespace conveyor
