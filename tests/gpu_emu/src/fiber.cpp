// The block executor: each CUDA thread of a block is a fiber (context.hpp) on its own guarded
// stack (blocks.cpp decides which block runs when). A fiber runs until it reaches a
// synchronizing call (__syncthreads, a warp shuffle or vote) or exits, then the scheduler picks
// the next runnable fiber in the configured order (forward, reverse, or a fresh random
// permutation after every barrier). A barrier opens when every thread of the block waits at the
// same __syncthreads; a warp operation completes when every lane of its mask waits at the same
// operation. Anything else that leaves no fiber runnable is a divergence or a deadlock, reported
// with each group of threads and the source line it waits at.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "scheduler.hpp"
#include "tsan.hpp"

uint3 threadIdx;
uint3 blockIdx;
uint3 blockDim;
uint3 gridDim;

namespace conveyor_emu::detail {

thread_local runner* tl_runner = nullptr;

const char* op_name(warp_op op) {  // in warp_op's order
  static constexpr const char* names[] = {"__shfl_xor_sync", "__shfl_down_sync", "__shfl_up_sync", "__shfl_sync",
                                          "__ballot_sync",   "__any_sync",       "__all_sync",     "__syncwarp",
                                          "wmma::load_matrix_sync", "wmma::store_matrix_sync", "wmma::mma_sync"};
  static_assert(std::size(names) == static_cast<size_t>(warp_op::wmma_mma) + 1, "a name per warp_op");
  return names[static_cast<size_t>(op)];
}

std::string where(const std::source_location& s) {
  std::string file = s.file_name();
  if (auto p = file.rfind('/'); p != std::string::npos) file = file.substr(p + 1);
  return file + ":" + std::to_string(s.line());
}

void yield(runner& r, fiber& f) {
#if CONVEYOR_EMU_ASAN
  __sanitizer_start_switch_fiber(&f.fake_stack, r.sched_bottom, r.sched_size);
#endif
  if (!r.tsan_blocks) tsan::switch_to(r.host_tsan);
  switch_context(f.ctx, r.sched);
#if CONVEYOR_EMU_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, &r.sched_bottom, &r.sched_size);
#endif
}

namespace {

runner* new_runner() {
  auto* r = new runner();  // lives as long as the host thread (fiber stacks are reused)
  r->rng.seed(thread_order_seed());
  r->smem = reinterpret_cast<unsigned char*>(new_fiber_stack(kSmemBytes));  // a guarded mapping
  r->tsan_blocks = tsan::blocks_mode();
  install_fault_report();
  return r;
}

void fiber_entry(long idx) {
  runner& r = *tl_runner;
  fiber& f = r.fibers[static_cast<size_t>(idx)];
#if CONVEYOR_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &r.sched_bottom, &r.sched_size);
#endif
  tsan::acquire(&r.sync_launch);  // the host's work before the block
  try {
    r.k->body();
  } catch (const std::exception& e) {
    if (r.fault.empty()) r.fault = e.what();
  } catch (...) {
    if (r.fault.empty()) r.fault = "a non-standard exception escaped the kernel";
  }
  f.state = fstate::exited;
  tsan::release(&r.sync_done);  // for the host's work after the kernel
  if (!r.tsan_blocks) tsan::switch_to(r.host_tsan);
#if CONVEYOR_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, r.sched_bottom, r.sched_size);
#endif
  switch_context(f.ctx, r.sched);
  std::abort();  // an exited fiber is never resumed
}

void resume(runner& r, int i) {
  fiber& f = r.fibers[static_cast<size_t>(i)];
  threadIdx = f.tid;
  r.current = i;
#if CONVEYOR_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
#endif
  if (!r.tsan_blocks) tsan::switch_to(f.tsan);
  switch_context(r.sched, f.ctx);
#if CONVEYOR_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  r.current = -1;
}

// "128 threads: 64 wait at __syncthreads (attention.cu:88) [0..63]; 64 exited [64..127]"
std::string describe(const runner& r) {
  std::map<std::string, std::vector<int>> groups;
  for (int i = 0; i < r.n; ++i) {
    const fiber& f = r.fibers[static_cast<size_t>(i)];
    std::string key = f.state == fstate::exited    ? "exited"
                      : f.state == fstate::barrier ? "wait at __syncthreads (" + where(f.site) + ")"
                      : f.state == fstate::warp    ? std::string("wait at ") + op_name(f.op) + " (" + where(f.site) + ")"
                                                   : "runnable";
    groups[key].push_back(i);
  }
  std::ostringstream m;
  m << r.n << " threads:";
  for (const auto& [what, ids] : groups) {
    m << " " << ids.size() << " " << what << " [threads " << ids.front();
    if (ids.size() > 1) m << (ids.back() - ids.front() + 1 == static_cast<int>(ids.size()) ? ".." : ",..,") << ids.back();
    m << "];";
  }
  return m.str();
}

// Completes the warp operation fiber i waits at when every lane of its mask waits at it too.
void try_complete_warp(runner& r, int i) {
  const fiber& f = r.fibers[static_cast<size_t>(i)];
  const int base = f.warp * 32;
  auto fault = [&](const std::string& what) {  // built only on failure: this runs for every warp operation
    std::ostringstream m;
    m << op_name(f.op) << " (" << where(f.site) << ") by thread " << i << " with mask 0x" << std::hex << f.mask << std::dec << ": " << what;
    return fault_error(m.str());
  };
  if (!((f.mask >> f.lane) & 1u)) throw fault("the mask does not include the calling lane");
  if (f.width <= 0 || f.width > 32 || (f.width & (f.width - 1)) != 0) throw fault("width must be a power of two <= 32");
  for (int lane = 0; lane < 32; ++lane) {
    if (!((f.mask >> lane) & 1u)) continue;
    const int j = base + lane;
    if (j >= r.n) throw fault("the mask names lane " + std::to_string(lane) + ", which this block (" +
                                    std::to_string(r.n) + " threads) does not have");
    const fiber& g = r.fibers[static_cast<size_t>(j)];
    if (g.state == fstate::exited) throw fault("lane " + std::to_string(lane) + " of the mask has exited");
    if (g.state != fstate::warp) return;  // not there yet (or stuck at a barrier: a deadlock, found later)
    if (g.op != f.op || g.mask != f.mask)
      throw fault("divergent warp: lane " + std::to_string(lane) + " waits at " + op_name(g.op) + " (" +
                        where(g.site) + ") with another operation or mask");
  }
  if (f.op == warp_op::wmma_load || f.op == warp_op::wmma_store || f.op == warp_op::wmma_mma) {
    const wmma_call* calls[32];  // src/wmma.cpp checks that the lanes agree, and computes mma_sync
    for (int lane = 0; lane < 32; ++lane) calls[lane] = reinterpret_cast<const wmma_call*>(r.fibers[static_cast<size_t>(base + lane)].in);
    if (std::string e = wmma_complete(f.op, calls); !e.empty()) throw fault(e);
  }
  uint64_t vote = 0;
  for (int lane = 0; lane < 32; ++lane)
    if ((f.mask >> lane) & 1u && r.fibers[static_cast<size_t>(base + lane)].in) vote |= 1ull << lane;
  for (int lane = 0; lane < 32; ++lane) {
    if (!((f.mask >> lane) & 1u)) continue;
    fiber& g = r.fibers[static_cast<size_t>(base + lane)];
    const int w = g.width, group = lane / w * w, sub = lane % w;
    int src = lane;
    switch (g.op) {
      case warp_op::shfl_xor: src = (lane ^ g.param) < group + w && (lane ^ g.param) >= group ? lane ^ g.param : lane; break;
      case warp_op::shfl_down: src = sub + g.param < w ? lane + g.param : lane; break;
      case warp_op::shfl_up: src = sub - g.param >= 0 ? lane - g.param : lane; break;
      case warp_op::shfl_idx: src = group + ((g.param % w) + w) % w; break;
      default: break;
    }
    if (!((f.mask >> src) & 1u))
      throw fault("lane " + std::to_string(lane) + " reads lane " + std::to_string(src) + ", which is not in the mask");
    switch (g.op) {
      case warp_op::ballot: g.out = vote; break;
      case warp_op::any: g.out = vote != 0; break;
      case warp_op::all: g.out = vote == (f.mask & 0xffffffffull); break;
      case warp_op::syncwarp: g.out = 0; break;
      default: g.out = r.fibers[static_cast<size_t>(base + src)].in; break;
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    if ((f.mask >> lane) & 1u) r.fibers[static_cast<size_t>(base + lane)].state = fstate::runnable;
  if (f.op == warp_op::syncwarp) ++r.warp_gen[f.warp];
}

void reorder(runner& r) {
  const thread_order o = current_thread_order();
  for (int i = 0; i < r.n; ++i) r.order[static_cast<size_t>(i)] = o == thread_order::reverse ? r.n - 1 - i : i;
  if (o == thread_order::random) std::shuffle(r.order.begin(), r.order.begin() + r.n, r.rng);
}

} // namespace

void set_current_runner(runner& r) { tl_runner = &r; }

runner& runner_at(size_t i) {
  // Plain pointers, alive for the thread's life (a vector would free them at exit: a leak report).
  thread_local runner* pool[kMaxRunners] = {};
  if (i >= kMaxRunners) throw fault_error("runner " + std::to_string(i) + " asked for: a wave takes at most 16 blocks");
  if (!pool[i]) pool[i] = new_runner();
  if (!tl_runner) tl_runner = pool[0];
  return *pool[i];
}

void start_block(runner& r) {
  r.slots.clear();
  r.dyn_end = (r.k->dyn_smem + 255) / 256 * 256;
  r.static_end = r.dyn_end;
#if CONVEYOR_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(r.smem, r.k->dyn_smem);
  ASAN_POISON_MEMORY_REGION(r.smem + r.k->dyn_smem, kSmemBytes - r.k->dyn_smem);
  r.guard_end = r.k->dyn_smem;  // ASan guards what lies past it
#else
  r.guard_end = std::min(kSmemBytes, r.k->dyn_smem + kSmemGuardBytes);
#endif
  if (r.tsan_blocks) tsan::fresh_pages(r.smem, (r.smem_used + 4095) / 4096 * 4096);  // forget the last block's
  else tsan::acquire(&r.sync_done);  // the previous block's threads, before the host refills their memory
  {
    [[maybe_unused]] tsan::unrecorded garbage;
    std::memset(r.smem, poison_byte(), r.guard_end);  // garbage (control.hpp's poison) in the launch's memory and the guard band
  }
  tsan::release(&r.sync_launch);  // the host's work so far, for this block's threads
  const dim3 b = r.k->block;
  for (int i = 0; i < r.n; ++i) {
    fiber& f = r.fibers[static_cast<size_t>(i)];
    if (!f.stack) f.stack = new_fiber_stack(kStackBytes);
    if (r.tsan_blocks) tsan::fresh_pages(f.stack + kStackBytes - kTsanStackReset, kTsanStackReset);
    if (!r.tsan_blocks && !f.tsan) f.tsan = tsan::create(("thread " + std::to_string(i)).c_str());
#if CONVEYOR_EMU_ASAN
    if (f.stack_dirty) ASAN_UNPOISON_MEMORY_REGION(f.stack, kStackBytes);
#endif
    f.stack_dirty = true;  // until it exits cleanly
    f.tid = uint3{static_cast<unsigned>(i) % b.x, static_cast<unsigned>(i) / b.x % b.y, static_cast<unsigned>(i) / (b.x * b.y)};
    f.lane = i % 32;
    f.warp = i / 32;
    f.state = fstate::runnable;
    f.fake_stack = nullptr;
    make_context(f.ctx, f.stack, kStackBytes, fiber_entry, i);
  }
  reorder(r);
}

void tsan_block_begin(runner& r) {  // CONVEYOR_EMU_TSAN_MODE=blocks: the block's threads as one TSan fiber
  if (!r.tsan_blocks) return;
  // A ring of fibers, reused: blocks kTsanBlockFibers apart in time share one and are ordered,
  // any nearer two are not (creating a TSan fiber per block costs more than the block).
  void*& f = r.block_fibers[r.block_count++ % kTsanBlockFibers];
  if (!f) f = tsan::create(("block fiber " + std::to_string(r.block_count % kTsanBlockFibers)).c_str());
  r.block_tsan = f;
  tsan::switch_to(r.block_tsan);
}

void tsan_block_end(runner& r) {
  if (r.tsan_blocks) tsan::switch_to(r.host_tsan);
}

bool step_block(runner& r) {
  for (;;) {
    bool ran = false;
    for (int k = 0; k < r.n; ++k) {
      const int i = r.order[static_cast<size_t>(k)];
      fiber& f = r.fibers[static_cast<size_t>(i)];
      if (f.state != fstate::runnable) continue;
      resume(r, i);
      ran = true;
      if (!r.fault.empty()) throw fault_error("thread " + std::to_string(i) + ": " + r.fault);
      if (f.state == fstate::exited) f.stack_dirty = false;
      if (f.state == fstate::warp) try_complete_warp(r, i);
    }
    if (ran) continue;
    int exited = 0, at_barrier = 0;
    for (int i = 0; i < r.n; ++i) {
      exited += r.fibers[static_cast<size_t>(i)].state == fstate::exited;
      at_barrier += r.fibers[static_cast<size_t>(i)].state == fstate::barrier;
    }
    if (exited == r.n) {
      r.smem_used = std::max(r.dyn_end, r.static_end);  // what its threads may have touched
      check_smem_guard(r.smem, r.k->dyn_smem, r.dyn_end, r.static_end, r.guard_end);
      return true;
    }
    if (at_barrier == r.n) {
      const std::source_location& s0 = r.fibers[0].site;
      for (int i = 1; i < r.n; ++i) {
        const std::source_location& s = r.fibers[static_cast<size_t>(i)].site;
        if (s.line() != s0.line() || (s.file_name() != s0.file_name() && std::strcmp(s.file_name(), s0.file_name()) != 0))
          throw fault_error("divergent __syncthreads (different call sites): " + describe(r));
      }
      return false;
    }
    throw fault_error(std::string(exited ? "divergence (threads exited while others wait)" : "deadlock") + ": " + describe(r));
  }
}

void open_barrier(runner& r) {
  for (int i = 0; i < r.n; ++i) r.fibers[static_cast<size_t>(i)].state = fstate::runnable;
  ++r.block_gen;
  if (current_thread_order() == thread_order::random) reorder(r);
}

} // namespace conveyor_emu::detail

