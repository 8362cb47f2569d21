// The emulator's own controls, for tests: the devices it pretends to have, the order in which
// CUDA threads run between barriers, sticky-fault reset, counters of live objects (leak checks)
// and a log of the kernels that ran (grid shapes, graph or eager).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "conveyor_emu/runtime_api.hpp"

namespace conveyor_emu {

struct device_config {
  std::string name = "NVIDIA H100 80GB HBM3 (conveyor CUDA emulator)";
  int major = 9, minor = 0;
  int sm_count = 132;
  size_t total_bytes = size_t{16} << 30;  ///< CONVEYOR_EMU_MEM_GIB overrides the default
  int smem_optin = 232448;                ///< cudaDevAttrMaxSharedMemoryPerBlockOptin
};

/// Replaces the device list (default: one device_config{}) and clears any sticky fault.
/// Allocations and the function attributes set on device ordinals that remain stay valid (code
/// under test caches what it set once per process and device, as it may on a GPU).
void configure(const std::vector<device_config>& devices);
const std::vector<device_config>& devices();

enum class thread_order { forward, reverse, random };
/// Order in which a block's threads run between barriers, and a launch's blocks run (default
/// from CONVEYOR_EMU_ORDER: forward | reverse | random[:seed]).
void set_thread_order(thread_order o, uint64_t seed = 1);
thread_order current_thread_order();
const char* thread_order_name(thread_order o);

enum class block_mode { sequential, interleave };
/// How a launch's blocks share the host thread (default from CONVEYOR_EMU_BLOCKS: sequential |
/// interleave[:W]). sequential: each block runs to its end before the next starts, in the thread
/// order's block order. interleave: waves of W (default 4, 2..16) consecutive blocks run
/// together, each block's threads up to its next __syncthreads (or its end) at a time, the
/// wave's blocks taken in turn (forward, reverse, or shuffled each round in the random order),
/// so one block's phase runs between another's: code that needs a block's writes to global
/// memory to stay its own until the block ends (two blocks sharing scratch rows, a tile writing
/// another block's rows) gives wrong results. Builds with ThreadSanitizer run sequentially.
void set_block_mode(block_mode m, int wave = 4);
block_mode current_block_mode();
int block_wave();
const char* block_mode_name(block_mode m);

enum class poison_kind { nan, finite };
/// What fresh device memory and every block's shared memory hold before anything writes them
/// (default from CONVEYOR_EMU_POISON: nan | finite). nan: 0xFF bytes, NaN as f32, bf16 and f64,
/// -1 as int32. finite: 0x7F bytes, +3.39e38 as f32 and as bf16 (its largest finite value),
/// 1.4e306 as f64, 2139062143 as int32: garbage that no NaN test, and no "> 0" test, mistakes
/// for empty. Allocations of 64 MiB and more are mapped zero pages (not filled: 16 GiB "GPUs").
void set_poison(poison_kind k);
poison_kind current_poison();
/// The byte both kinds fill with.
unsigned char poison_byte();

/// Clears a sticky fault, the last error and every queued operation (tests that provoke faults).
void reset();
/// The description of the last fault a kernel raised ("" if none).
std::string last_fault();

struct counters {
  int64_t live_streams = 0, live_events = 0, live_graphs = 0, live_graph_execs = 0, live_device_allocs = 0,
          live_host_allocs = 0;
  size_t device_bytes = 0;
  int64_t kernels_run = 0, blocks_run = 0;
};
counters stats();

struct launch_record {
  std::string kernel;
  dim3 grid, block;
  size_t smem = 0;
  int device = 0;
  bool from_graph = false;
};
/// Kernels that ran (in execution order, the last 4096).
std::vector<launch_record> launch_log();
void clear_launch_log();

} // namespace conveyor_emu
