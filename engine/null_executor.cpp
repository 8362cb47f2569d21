#include "engine/null_executor.hpp"

namespace conveyor {

step_result null_executor::step(const step_plan& plan) {
  step_result r;
  r.step_id = plan.step_id;
  r.sampled.reserve(plan.seqs.size());
  for (const auto& s : plan.seqs)
    if (s.sample) r.sampled.push_back({s.id, token_, 0.0f, {}});
  return r;
}

} // namespace conveyor
