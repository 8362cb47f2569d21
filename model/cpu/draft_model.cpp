#include "model/cpu/draft_model.hpp"

#include <algorithm>
#include <string>

namespace conveyor::model {

cpu_draft_proposer::cpu_draft_proposer(std::unique_ptr<gguf_file> file, const draft_model_options& o) : file_(std::move(file)) {
  cpu_executor_options eo;
  eo.block_size = o.block_size;
  eo.num_kv_blocks = o.num_kv_blocks;
  eo.threads = o.threads;
  eo.math = o.math;
  ex_ = std::make_unique<cpu_executor>(*file_, eo);
  if (ex_->info().vocab_size != o.vocab_size)
    throw model_error("the draft model's vocabulary has " + std::to_string(ex_->info().vocab_size) + " tokens and the model's " +
                      std::to_string(o.vocab_size) + ": a draft model must share the model's vocabulary (a smaller model of the same family)");
  for (block_id b = ex_->info().num_kv_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool cpu_draft_proposer::reserve(seq_state& s, int64_t num_tokens) {
  const int64_t bs = ex_->info().block_size;
  const auto need = static_cast<size_t>((num_tokens + bs - 1) / bs);
  if (need <= s.blocks.size()) return true;
  if (need - s.blocks.size() > free_.size()) return false;
  while (s.blocks.size() < need) {
    s.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

// One step of the draft model over `tokens` at the sequence's next positions; the greedy token
// after them when `sample`, else -1.
token_id cpu_draft_proposer::run(seq_state& s, seq_id id, std::span<const token_id> tokens, bool sample) {
  step_plan plan;
  plan.step_id = ++step_id_;
  scheduled_seq& q = plan.seqs.emplace_back();
  q.id = id;
  q.num_computed_tokens = static_cast<int32_t>(s.cached.size());
  q.tokens.assign(tokens.begin(), tokens.end());
  q.block_table = s.blocks;
  q.sample = sample;
  q.sampling.temperature = 0.0f;
  const step_result r = ex_->step(plan);
  s.cached.insert(s.cached.end(), tokens.begin(), tokens.end());
  num_computed_ += static_cast<int64_t>(tokens.size());
  return sample ? r.sampled.at(0).token : -1;
}

int32_t cpu_draft_proposer::propose(seq_id id, std::span<const token_id> tokens, int32_t k, std::vector<token_id>& out) {
  out.clear();
  const auto len = static_cast<int64_t>(tokens.size());
  // The drafts' positions are len .. len + k - 1; all but the last are computed.
  k = static_cast<int32_t>(std::min<int64_t>(k, ex_->info().max_model_len - len));
  if (k <= 0 || len == 0) return 0;
  seq_state& s = seqs_[id];
  // Positions whose K and V still hold this sequence's tokens (at least the newest is computed
  // again: its logits give the first draft).
  size_t valid = 0;
  while (valid < s.cached.size() && valid + 1 < tokens.size() && s.cached[valid] == tokens[valid]) ++valid;
  s.cached.resize(valid);
  if (!reserve(s, len + k - 1)) return 0;
  constexpr int64_t chunk = 512;  // the catch-up (a prompt at first) in steps of this many tokens
  token_id next = -1;
  for (auto from = static_cast<int64_t>(valid); from < len; from += chunk) {
    const int64_t to = std::min(len, from + chunk);
    next = run(s, id, tokens.subspan(static_cast<size_t>(from), static_cast<size_t>(to - from)), to == len);
  }
  out.push_back(next);
  while (static_cast<int32_t>(out.size()) < k) {
    const token_id last = out.back();
    out.push_back(run(s, id, std::span<const token_id>(&last, 1), true));
  }
  return k;
}

void cpu_draft_proposer::release(seq_id id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  free_.insert(free_.end(), it->second.blocks.rbegin(), it->second.blocks.rend());
  seqs_.erase(it);
}

} // namespace conveyor::model
