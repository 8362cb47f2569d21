#include "engine/speculation.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/enum_names.hpp"

namespace conveyor {

namespace {

constexpr auto spec_method_names = make_enum_names<spec_method>(
    {{spec_method::none, "none"}, {spec_method::ngram, "ngram"}, {spec_method::draft_model, "draft_model"}});

} // namespace

const char* to_string(spec_method m) { return spec_method_names.name(m); }

std::optional<spec_method> parse_spec_method(const std::string& text) { return spec_method_names.parse(text); }

std::string speculative_config::validate() const {
  if (num_speculative_tokens < 1 || num_speculative_tokens > 16)
    return "speculative num_speculative_tokens = " + std::to_string(num_speculative_tokens) + ": must be in [1, 16]";
  if (prompt_lookup_min < 1 || prompt_lookup_max > 16 || prompt_lookup_min > prompt_lookup_max)
    return "speculative prompt_lookup_min = " + std::to_string(prompt_lookup_min) + ", prompt_lookup_max = " +
           std::to_string(prompt_lookup_max) + ": need 1 <= prompt_lookup_min <= prompt_lookup_max <= 16";
  if (method == spec_method::draft_model && model.empty())
    return "speculative method draft_model needs model: the draft model's GGUF file (same vocabulary, fewer parameters)";
  if (method != spec_method::draft_model && !model.empty())
    return std::string("speculative model '") + model + "' is only for method draft_model (method is " + to_string(method) + ")";
  if (!(fixed_cost_tokens >= 0.0) || !std::isfinite(fixed_cost_tokens))
    return "speculative fixed_cost_tokens = " + std::to_string(fixed_cost_tokens) + ": must be >= 0 (0: the executor's estimate)";
  return {};
}

void spec_history::record(int32_t num_drafted, int32_t num_accepted) {
  accepted = accepted * spec_history_decay + num_accepted;
  reached = reached * spec_history_decay + num_accepted + (num_accepted < num_drafted ? 1 : 0);
  idle_steps = 0;
}

double draft_threshold(double fixed_cost_tokens, int32_t num_sampling) {
  const int32_t n = std::max(num_sampling, 1);
  return n / (fixed_cost_tokens + n);
}

int32_t draft_budget(const spec_history& h, int32_t cap, double threshold) {
  const double p = h.accept_rate();
  int32_t n = 0;
  for (double chance = p; n < cap && chance > threshold; chance *= p) ++n;
  if (n == 0 && cap > 0 && h.idle_steps >= spec_retry_steps) n = 1;
  return n;
}

int32_t propose_ngram(ngram_index& index, std::span<const token_id> tokens, int32_t min_n, int32_t max_n, int32_t k,
                      std::vector<token_id>& out) {
  out.clear();
  const auto len = static_cast<int64_t>(tokens.size());
  const int64_t cap_n = std::min<int64_t>(max_n, len - 1);
  if (k <= 0 || cap_n < min_n) return 0;
  index.update(tokens, min_n);
  // Every earlier occurrence of the newest min_n tokens (the index's chain, latest first) with
  // how far back it matches the sequence's end (at most cap_n, and not past the start).
  thread_local std::vector<std::pair<int64_t, int64_t>> found;  // (end, match length)
  found.clear();
  int64_t n = 0;
  index.walk(tokens, [&](int64_t end) {
    const int64_t most = std::min(cap_n, end);
    int64_t m = 0;
    while (m < most && tokens[static_cast<size_t>(end - 1 - m)] == tokens[static_cast<size_t>(len - 1 - m)]) ++m;
    if (m >= min_n) {
      found.emplace_back(end, m);
      n = std::max(n, m);
    }
    return true;
  });
  if (n == 0) return 0;
  // The occurrences of the longest suffix that has any: where their continuations are.
  thread_local std::vector<int64_t> alive;
  alive.clear();
  for (const auto& [end, m] : found)
    if (m >= n) alive.push_back(end);
  const int64_t limit = std::min<int64_t>(k, ngram_draft_per_match_token * n);
  for (int64_t step = 0; step < limit; ++step) {
    // The occurrences still agreeing that reach this far vote; the latest one proposes.
    int64_t voters = 0, agree = 0;
    token_id proposed = 0;
    for (int64_t from : alive) {
      if (from + step >= len) continue;
      const token_id t = tokens[static_cast<size_t>(from + step)];
      if (voters++ == 0) proposed = t;
      if (t == proposed) ++agree;
    }
    if (voters == 0 || agree * ngram_vote_den < voters * ngram_vote_num) break;
    out.push_back(proposed);
    std::erase_if(alive, [&](int64_t from) { return from + step >= len || tokens[static_cast<size_t>(from + step)] != proposed; });
  }
  return static_cast<int32_t>(out.size());
}

int32_t propose_ngram(std::span<const token_id> tokens, int32_t min_n, int32_t max_n, int32_t k, std::vector<token_id>& out) {
  ngram_index index;
  return propose_ngram(index, tokens, min_n, max_n, k, out);
}

int32_t grammar_prefix(token_constraint& g, std::span<const token_id> drafts) {
  int32_t n = 0;
  for (token_id t : drafts) {
    if (!g.accept(t)) break;
    ++n;
  }
  g.rollback(n);
  return n;
}

} // namespace conveyor
