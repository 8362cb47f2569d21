// The executor actor: a detached shell around one engine executor (CPU or CUDA).
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "engine/executor.hpp"

namespace conveyor::actors {

/// Spawns the executor actor on its own thread (detached: a step may take long); it owns `ex`
/// from now on. `detached` false runs it on CAF's scheduler (the actor tests' deterministic one).
executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<executor> ex, bool detached = true);

} // namespace conveyor::actors
