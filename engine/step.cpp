#include "engine/step.hpp"

namespace conveyor {

prompt_rows prompt_rows_of(const step_plan& plan) {
  prompt_rows p;
  int32_t row0 = 0;
  for (const auto& s : plan.seqs) {
    for (size_t i = 0; i < s.prompt_targets.size(); ++i) {
      p.rows.push_back(row0 + static_cast<int32_t>(i));
      p.tops.push_back(s.prompt_top);
      p.scores.push_back({s.id, s.prompt_targets[i], 0.0f, {}});
    }
    row0 += static_cast<int32_t>(s.tokens.size());
  }
  return p;
}

} // namespace conveyor
