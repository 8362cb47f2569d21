#include "actors/executor_actor.hpp"

#include <exception>

namespace conveyor::actors {
namespace {

template <class F>
auto guarded(F&& f) -> caf::result<decltype(f())> {
  try {
    return f();
  } catch (const std::exception& e) {
    return caf::make_error(caf::sec::runtime_error, std::string("executor failed: ") + e.what());
  }
}

executor_actor::behavior_type executor_impl(executor_actor::pointer, std::shared_ptr<executor> ex) {
  return {
      [ex](x_step_atom, const step_plan& plan) -> caf::result<step_result> { return guarded([&] { return ex->step(plan); }); },
      [ex](x_submit_atom, const step_plan& plan) -> caf::result<uint64_t> {
        return guarded([&] {
          ex->submit(plan);
          return plan.step_id;
        });
      },
      // Blocks this (detached) actor's thread until the device is done with the oldest step.
      [ex](x_collect_atom) -> caf::result<step_result> { return guarded([&] { return ex->collect(); }); },
  };
}

} // namespace

executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<executor> ex, bool detached) {
  if (!detached) return sys.spawn(executor_impl, std::move(ex));
  return sys.spawn<caf::detached>(executor_impl, std::move(ex));
}

} // namespace conveyor::actors
