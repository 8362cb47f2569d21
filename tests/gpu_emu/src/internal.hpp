// Shared between the emulator's runtime (streams, memory, graphs) and its fiber scheduler.
#pragma once

#include <functional>
#include <source_location>
#include <stdexcept>
#include <string>

#include "conveyor_emu/control.hpp"
#include "conveyor_emu/device_api.hpp"
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

/// Runs every block of `k` on this host thread, each CUDA thread a fiber: one block at a time,
/// or waves of blocks interleaved at their barriers (control.hpp's block_mode; blocks.cpp).
/// Throws fault_error naming the kernel, the block and the threads involved.
void run_kernel(const kernel_launch& k);

/// The seed of the random thread order, and reseeding this host thread's scheduler with it.
uint64_t thread_order_seed();
void reseed_thread_order(uint64_t seed);

/// What one lane brings to a wmma rendezvous (src/wmma.cpp); fiber::in points at it.
struct wmma_call {
  int kind = 0;
  const void* ptr = nullptr;  ///< load/store: the tile
  unsigned ldm = 0;
  bool col_major = false;
  float* d = nullptr;  ///< mma: the lane's fragments
  const void* a = nullptr;
  const void* b = nullptr;
  const float* c = nullptr;
  int kind_b = 0;
  std::source_location site;  ///< the call's line: lanes at another wmma call of the same kind diverged
};
/// Runs when all 32 lanes wait at the same wmma operation (calls[lane] from fiber::in): checks
/// that they agree on the arguments and, for mma_sync, computes every lane's D. Returns "" or
/// what is wrong.
std::string wmma_complete(warp_op op, const wmma_call* const calls[32]);

/// Static shared memory one block may declare (CUDA's 48 KiB).
constexpr size_t kStaticSmemLimit = 48 * 1024;

/// Bytes past a block's dynamic shared memory filled with the poison byte before the block runs and checked
/// after it (src/smem_guard.cpp): a store past the launch's size is a fault, not silent.
constexpr size_t kSmemGuardBytes = 64 * 1024;
/// Throws fault_error if a byte of [dyn, guard_end) outside the static variables
/// [dyn_end, static_end) no longer holds the poison byte.
void check_smem_guard(const unsigned char* smem, size_t dyn, size_t dyn_end, size_t static_end, size_t guard_end);

} // namespace conveyor_emu::detail
