// The fiber scheduler's state, shared by the scheduler (fiber.cpp) and the calls kernels make
// into it (fiber_calls.cpp: __syncthreads, warp operations, shared memory).
#pragma once

#include <cstddef>
#include <random>
#include <source_location>
#include <string>
#include <vector>

#include "context.hpp"
#include "conveyor_emu/device_api.hpp"
#include "internal.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CONVEYOR_EMU_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define CONVEYOR_EMU_ASAN 0
#endif

namespace conveyor_emu::detail {

constexpr size_t kStackBytes = CONVEYOR_EMU_ASAN ? 512 * 1024 : 128 * 1024;
constexpr size_t kSmemBytes = 256 * 1024;
/// CONVEYOR_EMU_TSAN_MODE=blocks: the top of each fiber stack handed to a new block afresh (tsan.hpp).
constexpr size_t kTsanStackReset = 8 * 1024;
/// Runners a host thread may hold: one per block of the largest interleaved wave (control.hpp).
constexpr size_t kMaxRunners = 16;
/// CONVEYOR_EMU_TSAN_MODE=blocks: the TSan fibers blocks take turns on (tsan.hpp).
constexpr size_t kTsanBlockFibers = 16;

enum class fstate { runnable, barrier, warp, exited };

struct fiber {
  exec_context ctx;
  char* stack = nullptr;  // usable part, above the guard page
  bool stack_dirty = false;
  fstate state = fstate::exited;
  uint3 tid{};
  int lane = 0, warp = 0;
  std::source_location site;
  warp_op op = warp_op::syncwarp;
  unsigned mask = 0;
  uint64_t in = 0, out = 0;
  int param = 0, width = 32;
  void* fake_stack = nullptr;
  void* tsan = nullptr;  // its ThreadSanitizer fiber (tsan.hpp), created once
};

struct shared_slot {
  const void* key;
  size_t off;
};

struct runner {
  std::vector<fiber> fibers;
  exec_context sched;
  const kernel_launch* k = nullptr;
  std::vector<int> order;
  std::vector<size_t> blocks;  // the launch's blocks (linear ids) in the order they run
  int n = 0, current = -1;
  std::string fault;
  unsigned char* smem = nullptr;  // kSmemBytes, page-aligned (its own mapping)
  size_t dyn_end = 0, static_end = 0, guard_end = 0;
  size_t smem_used = kSmemBytes;  // shared memory the last block's threads could reach (TSan blocks mode)
  std::vector<shared_slot> slots;
  const void* sched_bottom = nullptr;
  size_t sched_size = 0;
  std::mt19937_64 rng{1};
  // ThreadSanitizer (tsan.hpp): the host's fiber, and the synchronization objects CUDA's ordering
  // rules map to. Barrier objects alternate by generation, so a thread that left a barrier and
  // reached the next cannot hand its new accesses to a thread still leaving the first.
  void* host_tsan = nullptr;
  bool tsan_blocks = false;       // CONVEYOR_EMU_TSAN_MODE=blocks (tsan.hpp)
  void* block_tsan = nullptr;     // in that mode, the running block's fiber, from this ring
  void* block_fibers[kTsanBlockFibers] = {};
  uint64_t block_count = 0;
  char sync_launch = 0, sync_done = 0, sync_block[2] = {}, sync_warp[32][2] = {};
  int block_gen = 0, warp_gen[32] = {};
};

/// The host thread's scheduler (null before its first kernel).
extern thread_local runner* tl_runner;

const char* op_name(warp_op op);
/// "file.cu:123"
std::string where(const std::source_location& s);
/// The fiber running now; a fault_error naming `what` when called outside a kernel.
fiber& current_fiber(const char* what, const std::source_location& loc);
/// Switches from fiber f back to the scheduler; returns when f is resumed.
void yield(runner& r, fiber& f);
/// Makes r the scheduler tl_runner names (set only in fiber.cpp, which defines it: UBSan in
/// GCC 12 reports stores to the extern thread_local from other files as stores through null).
void set_current_runner(runner& r);
/// This host thread's scheduler i (created on first use; 0 is the one tl_runner starts at).
/// Runners 1.. hold the other blocks of an interleaved wave (blocks.cpp).
runner& runner_at(size_t i);
/// Sets up r's block (r.k, r.n and blockIdx set): fresh shared memory, every thread runnable.
void start_block(runner& r);
/// Runs r's threads until all of them exited (true; the shared-memory guard checked) or all wait
/// at one __syncthreads (false; open_barrier lets them go). Throws fault_error on a fault.
bool step_block(runner& r);
void open_barrier(runner& r);
/// CONVEYOR_EMU_TSAN_MODE=blocks: a block's threads as one TSan fiber, around its whole run.
void tsan_block_begin(runner& r);
void tsan_block_end(runner& r);
/// Makes a fatal sanitizer report inside a kernel also name the launch, block and thread
/// (src/fault_report.cpp); idempotent.
void install_fault_report();

} // namespace conveyor_emu::detail
