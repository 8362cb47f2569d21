// Which block of a launch runs when (control.hpp's block_mode). Sequential: one block to its end
// after another, in the thread order's sense (forward, reverse, a seeded shuffle), so a result
// that depends on which block ran first fails in one of the ctest runs. Interleave: waves of W
// consecutive blocks, each on its own runner (its threads, shared memory and barriers), stepped
// in turn from one __syncthreads to the next, so the phases of neighbouring blocks interleave as
// they may on a GPU's SMs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "scheduler.hpp"
#include "tsan.hpp"

namespace conveyor_emu {
namespace {

struct blocks_setting {
  block_mode mode = block_mode::sequential;
  int wave = 4;
  blocks_setting() {
    const std::string v = std::getenv("CONVEYOR_EMU_BLOCKS") ? std::getenv("CONVEYOR_EMU_BLOCKS") : "";
    if (v.rfind("interleave", 0) == 0) {
      mode = block_mode::interleave;
      if (v.size() > 11) wave = std::atoi(v.c_str() + 11);
    }
    if ((!v.empty() && v != "sequential" && mode != block_mode::interleave) || wave < 2 || wave > 16) {
      std::fprintf(stderr, "CONVEYOR_EMU_BLOCKS=%s: expected sequential, interleave or interleave:W (W in 2..16)\n", v.c_str());
      std::abort();
    }
  }
};
blocks_setting& blocks() {
  static blocks_setting b;
  return b;
}

} // namespace

void set_block_mode(block_mode m, int wave) {
  if (wave < 2 || wave > 16) throw std::invalid_argument("set_block_mode: a wave takes 2..16 blocks");
  blocks().mode = m;
  blocks().wave = wave;
}
block_mode current_block_mode() { return blocks().mode; }
int block_wave() { return blocks().wave; }
const char* block_mode_name(block_mode m) { return m == block_mode::sequential ? "sequential" : "interleave"; }

} // namespace conveyor_emu

namespace conveyor_emu::detail {
namespace {

uint3 block_coords(const kernel_launch& k, size_t b) {
  return uint3{static_cast<unsigned>(b % k.grid.x), static_cast<unsigned>(b / k.grid.x % k.grid.y),
               static_cast<unsigned>(b / (size_t{k.grid.x} * k.grid.y))};
}

fault_error named(const kernel_launch& k, uint3 b, const fault_error& e) {
  std::ostringstream m;
  m << "kernel " << k.name << " (grid " << k.grid.x << "x" << k.grid.y << "x" << k.grid.z << ", block " << k.block.x << "x"
    << k.block.y << "x" << k.block.z << "), block (" << b.x << "," << b.y << "," << b.z << "): " << e.what();
  return fault_error(m.str());
}

/// Prepares runner r for kernel k (the first runner's checks done by run_kernel).
void bind(runner& r, const kernel_launch& k, int n) {
  if (r.fibers.size() < static_cast<size_t>(n)) r.fibers.resize(static_cast<size_t>(n));
  r.order.resize(std::max(r.order.size(), static_cast<size_t>(n)));
  r.n = n;
  r.k = &k;
  r.fault.clear();
  r.host_tsan = tsan::current();
  r.smem_used = kSmemBytes;  // a fault may have left the last block's extent unrecorded
}

void run_sequential(runner& r, const kernel_launch& k) {
  for (const size_t b : r.blocks) {
    blockIdx = block_coords(k, b);
    bool on_block_fiber = false;
    try {
      start_block(r);  // on the host's TSan fiber: it releases the host's work to the block
      tsan_block_begin(r);
      on_block_fiber = true;
      while (!step_block(r)) open_barrier(r);
      tsan_block_end(r);
    } catch (const fault_error& e) {
      if (on_block_fiber) tsan_block_end(r);
      throw named(k, blockIdx, e);
    }
  }
}

/// Blocks [b0, b0 + w) of the launch (linear ids), each on runner i, stepped in turn.
void run_wave(const kernel_launch& k, int n, size_t b0, size_t w) {
  runner& first = runner_at(0);
  std::vector<size_t> live(w);
  for (size_t i = 0; i < w; ++i) {
    live[i] = i;
    runner& r = runner_at(i);
    if (i > 0) {
      bind(r, k, n);
      r.rng.seed(first.rng());
    }
    set_current_runner(r);
    blockIdx = block_coords(k, b0 + i);
    try {
      start_block(r);
    } catch (const fault_error& e) {
      throw named(k, blockIdx, e);
    }
  }
  const thread_order o = current_thread_order();
  if (o == thread_order::reverse) std::reverse(live.begin(), live.end());
  while (!live.empty()) {
    if (o == thread_order::random) std::shuffle(live.begin(), live.end(), first.rng);
    std::vector<size_t> waiting;  // at a barrier after this round
    for (const size_t i : live) {
      runner& r = runner_at(i);
      set_current_runner(r);
      blockIdx = block_coords(k, b0 + i);
      try {
        if (!step_block(r)) waiting.push_back(i);
      } catch (const fault_error& e) {
        throw named(k, blockIdx, e);
      }
    }
    for (const size_t i : waiting) open_barrier(runner_at(i));
    live.assign(waiting.begin(), waiting.end());
  }
}

void run_interleaved(const kernel_launch& k, int n) {
  const size_t nb = size_t{k.grid.x} * k.grid.y * k.grid.z, w = static_cast<size_t>(block_wave());
  std::vector<size_t> waves;  // first block of each wave, in the thread order's sense
  for (size_t b = 0; b < nb; b += w) waves.push_back(b);
  if (const thread_order o = current_thread_order(); o == thread_order::reverse) std::reverse(waves.begin(), waves.end());
  else if (o == thread_order::random) std::shuffle(waves.begin(), waves.end(), runner_at(0).rng);
  for (const size_t b0 : waves) run_wave(k, n, b0, std::min(w, nb - b0));
}

} // namespace

void run_kernel(const kernel_launch& k) {
  runner& r = runner_at(0);
  set_current_runner(r);
  if (r.k) throw fault_error("kernel " + k.name + " launched while kernel " + r.k->name + " runs on the same host thread");
  const int n = static_cast<int>(k.block.x * k.block.y * k.block.z);
  bind(r, k, n);
  blockDim = uint3{k.block.x, k.block.y, k.block.z};
  gridDim = uint3{k.grid.x, k.grid.y, k.grid.z};
  const size_t nb = size_t{k.grid.x} * k.grid.y * k.grid.z;
  // Interleaving needs a runner per block of a wave; ThreadSanitizer's annotations assume one
  // block at a time (tsan.hpp), so its builds stay sequential.
  const bool interleave = current_block_mode() == block_mode::interleave && nb > 1 && !tsan::enabled;
  auto finish = [&] {
    for (size_t i = 0; i < (interleave ? static_cast<size_t>(block_wave()) : 1); ++i) runner_at(i).k = nullptr;
    set_current_runner(r);
    tsan::acquire(&r.sync_done);
  };
  try {
    if (interleave) {
      run_interleaved(k, n);
    } else {
      r.blocks.resize(nb);
      for (size_t b = 0; b < nb; ++b) r.blocks[b] = b;
      if (const thread_order o = current_thread_order(); o == thread_order::reverse) std::reverse(r.blocks.begin(), r.blocks.end());
      else if (o == thread_order::random) std::shuffle(r.blocks.begin(), r.blocks.end(), r.rng);
      run_sequential(r, k);
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
}

} // namespace conveyor_emu::detail
