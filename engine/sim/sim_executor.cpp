#include "engine/sim/sim_executor.hpp"

#include <chrono>
#include <thread>

namespace conveyor::sim {

step_result sim_executor::step(const step_plan& plan) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(cost_.step_s(plan));
  step_result r = null_.step(plan);
  std::this_thread::sleep_until(until);
  return r;
}

} // namespace conveyor::sim
