// Speculative decoding with a draft model (spec_method::draft_model): a second, smaller model
// with the target's vocabulary, run by its own CPU executor with its own paged KV pool, drafts
// greedily for one sequence at a time. It keeps each sequence's KV between proposals: the tokens
// it computed that still match the sequence (accepted drafts, the prompt) are not computed again;
// a rejected draft's slot is simply rewritten. Used by the scheduler's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/speculation.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/formats/gguf.hpp"

namespace conveyor::model {

struct draft_model_options {
  /// The target's vocabulary: the draft model must have exactly as many tokens.
  int32_t vocab_size = 0;
  /// KV blocks of the draft's pool (block_size tokens each): as many tokens as the target's pool
  /// holds, plus room for the drafts, is always enough.
  int32_t num_kv_blocks = 0;
  int32_t block_size = 16;
  int32_t threads = 0;
  cpu_math math = cpu_math::fast;
};

class cpu_draft_proposer final : public draft_proposer {
public:
  /// Throws model_error when the draft model cannot be run or its vocabulary size differs.
  cpu_draft_proposer(std::unique_ptr<gguf_file> file, const draft_model_options& o);

  int32_t propose(seq_id id, std::span<const token_id> tokens, int32_t k, std::vector<token_id>& out) override;
  void release(seq_id id) override;

  const cpu_executor& executor() const { return *ex_; }
  /// Tokens the draft model computed (prompt catch-up and drafting steps), for the tests.
  int64_t num_computed_tokens() const { return num_computed_; }
  /// Sequences it holds KV for (released ones are gone).
  size_t num_sequences() const { return seqs_.size(); }

private:
  struct seq_state {
    std::vector<block_id> blocks;
    std::vector<token_id> cached;  // the tokens whose K and V the draft's pool holds, by position
  };
  bool reserve(seq_state& s, int64_t num_tokens);
  token_id run(seq_state& s, seq_id id, std::span<const token_id> tokens, bool sample);

  std::unique_ptr<gguf_file> file_;
  std::unique_ptr<cpu_executor> ex_;
  std::unordered_map<seq_id, seq_state> seqs_;
  std::vector<block_id> free_;
  uint64_t step_id_ = 0;
  int64_t num_computed_ = 0;
};

} // namespace conveyor::model
