// Pure. `--device sim`: an executor that computes nothing but takes as long as a cost model says
// each step takes (it sleeps, using no CPU), so that several replicas on one small machine behave
// like several GPUs would (docs/scaling.md). Every sampling sequence gets the same fixed token.
#pragma once

#include "engine/executor.hpp"
#include "engine/null_executor.hpp"
#include "engine/sim/cost_model.hpp"

namespace conveyor::sim {

class sim_executor final : public executor {
public:
  sim_executor(const executor_info& info, token_id token, const cost_model& cost) : null_(info, token), cost_(cost) {}
  const executor_info& info() const override { return null_.info(); }
  /// Sleeps cost.step_s(plan), counted from the call, then answers as the null executor.
  step_result step(const step_plan& plan) override;

private:
  null_executor null_;
  cost_model cost_;
};

} // namespace conveyor::sim
