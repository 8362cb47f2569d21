// The executor actor: a detached shell around one engine executor (CPU or CUDA).
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "engine/executor.hpp"

namespace conveyor::actors {

/// Spawns the executor actor on its own thread; it owns `ex` from now on.
executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<executor> ex);

} // namespace conveyor::actors
