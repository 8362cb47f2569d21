#include "engine/executor.hpp"

#include <algorithm>
#include <stdexcept>

namespace conveyor {

namespace {

bool has_placeholder(const step_plan& plan) {
  return std::any_of(plan.seqs.begin(), plan.seqs.end(), [](const scheduled_seq& s) {
    return std::find(s.tokens.begin(), s.tokens.end(), k_previous_sample) != s.tokens.end();
  });
}

} // namespace

void executor::submit(const step_plan& plan) {
  step_result r;
  if (!has_placeholder(plan)) {
    r = step(plan);
  } else {
    step_plan resolved = plan;  // only decode steps carry placeholders: no long prompts copied
    for (auto& s : resolved.seqs) {
      for (token_id& t : s.tokens) {
        if (t != k_previous_sample) continue;
        auto it = last_sampled_.find(s.id);
        if (it == last_sampled_.end())
          throw std::invalid_argument("sequence " + std::to_string(s.id) +
                                      " asks for its previous sample, but the step submitted before sampled none for it");
        t = it->second;
      }
    }
    r = step(resolved);
  }
  last_sampled_.clear();
  for (const auto& x : r.sampled) last_sampled_[x.id] = x.token;
  done_.push_back(std::move(r));
}

step_result executor::collect() {
  if (done_.empty()) throw std::logic_error("executor::collect() without a submitted step");
  step_result r = std::move(done_.front());
  done_.pop_front();
  return r;
}

} // namespace conveyor
