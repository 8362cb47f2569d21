// Pure. An executor that computes nothing: every sequence that samples gets the same fixed
// token at once. It measures the runtime's own overhead (intake, actors, PUB) and drives tests
// that need a server but no model arithmetic.
#pragma once

#include "engine/executor.hpp"

namespace conveyor {

class null_executor final : public executor {
public:
  /// `token` is what every sampling sequence receives (its logprob is 0).
  null_executor(const executor_info& info, token_id token) : info_(info), token_(token) {}
  const executor_info& info() const override { return info_; }
  step_result step(const step_plan& plan) override;

private:
  executor_info info_;
  token_id token_;
};

} // namespace conveyor
