#include "engine/plan_check.hpp"

namespace conveyor {

std::string check_plan(const step_plan& plan, const executor_info& info, bool allow_previous_sample) {
  for (const auto& s : plan.seqs) {
    const std::string who = "sequence " + std::to_string(s.id);
    if (s.tokens.empty()) return who + " has no tokens";
    if (s.num_computed_tokens < 0) return who + " has negative num_computed_tokens";
    const int64_t end = int64_t{s.num_computed_tokens} + static_cast<int64_t>(s.tokens.size());
    if (end > info.max_model_len) return who + " reaches position " + std::to_string(end) + " past max_model_len";
    if (end > static_cast<int64_t>(s.block_table.size()) * info.block_size) return who + " has too few blocks for its positions";
    for (block_id b : s.block_table)
      if (b < 0 || b >= info.num_kv_blocks) return who + " uses unknown block " + std::to_string(b);
    for (token_id t : s.tokens) {
      if (t == k_previous_sample && allow_previous_sample) {
        if (s.tokens.size() != 1 || !s.sample) return who + " has a previous-sample token that is not its one decode token";
        continue;
      }
      if (t < 0 || t >= info.vocab_size) return who + " has token id " + std::to_string(t) + " outside the vocabulary";
    }
    if (!s.prompt_targets.empty() && !info.scores_prompts) return who + " has prompt targets, which this executor does not score";
    if (s.prompt_targets.size() > s.tokens.size()) return who + " has more prompt targets than tokens";
    if (s.prompt_top < 0 || s.prompt_top > max_top_logprobs) return who + " asks for " + std::to_string(s.prompt_top) + " prompt alternatives";
    if (s.num_drafts != 0) {
      if (!info.verifies_drafts) return who + " has drafts, which this executor does not verify";
      if (s.num_drafts < 0 || static_cast<size_t>(s.num_drafts) >= s.tokens.size() || !s.sample)
        return who + " has " + std::to_string(s.num_drafts) + " drafts among " + std::to_string(s.tokens.size()) + " tokens" +
               (s.sample ? "" : " without sampling");
    }
    for (token_id t : s.prompt_targets)
      if (t < 0 || t >= info.vocab_size) return who + " has prompt target " + std::to_string(t) + " outside the vocabulary";
  }
  return {};
}

} // namespace conveyor
