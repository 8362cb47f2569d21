// Shared between the emulator's runtime (streams, memory, graphs) and its fiber scheduler.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include "conveyor_emu/control.hpp"
#include "conveyor_emu/runtime_api.hpp"

namespace conveyor_emu::detail {

/// A fault found while a kernel runs: divergence, deadlock, a shared-memory limit, a bad mask.
struct fault_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct kernel_launch {
  const void* func = nullptr;
  std::string name;
  dim3 grid, block;
  size_t dyn_smem = 0;
  size_t smem_optin = 0;  ///< most shared memory (static + dynamic) one block may use
  std::function<void()> body;
};

/// Runs every block of `k` on this host thread, one block at a time, each CUDA thread a fiber.
/// Throws fault_error naming the kernel, the block and the threads involved.
void run_kernel(const kernel_launch& k);

/// The seed of the random thread order, and reseeding this host thread's scheduler with it.
uint64_t thread_order_seed();
void reseed_thread_order(uint64_t seed);

/// Static shared memory one block may declare (CUDA's 48 KiB).
constexpr size_t kStaticSmemLimit = 48 * 1024;

} // namespace conveyor_emu::detail
