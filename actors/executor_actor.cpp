#include "actors/executor_actor.hpp"

#include <exception>

namespace conveyor::actors {
namespace {

executor_actor::behavior_type executor_impl(executor_actor::pointer, std::shared_ptr<executor> ex) {
  return {
      [ex](x_step_atom, const step_plan& plan) -> caf::result<step_result> {
        try {
          return ex->step(plan);
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::runtime_error, std::string("executor failed: ") + e.what());
        }
      },
  };
}

} // namespace

executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<executor> ex, bool detached) {
  if (!detached) return sys.spawn(executor_impl, std::move(ex));
  return sys.spawn<caf::detached>(executor_impl, std::move(ex));
}

} // namespace conveyor::actors
