// The calls a kernel makes into the fiber scheduler (scheduler.hpp): __syncthreads, warp
// operations (shuffles, votes, __syncwarp, wmma), shared memory, device faults.
#include <cstring>
#include <sstream>
#include <string>

#include "scheduler.hpp"
#include "tsan.hpp"

namespace conveyor_emu::detail {

fiber& current_fiber(const char* what, const std::source_location& loc) {
  runner* r = tl_runner;
  if (!r || r->current < 0) {
    std::ostringstream m;
    m << what << " called outside a kernel at " << loc.file_name() << ":" << loc.line();
    throw fault_error(m.str());
  }
  return r->fibers[static_cast<size_t>(r->current)];
}

void syncthreads(const std::source_location& loc) {
  fiber& f = current_fiber("__syncthreads", loc);
  f.state = fstate::barrier;
  f.site = loc;
  runner& r = *tl_runner;
  const int gen = r.block_gen & 1;  // the scheduler advances it when the barrier opens
  if (!r.tsan_blocks) tsan::release(&r.sync_block[gen]);
  yield(r, f);
  if (!r.tsan_blocks) tsan::acquire(&r.sync_block[gen]);
}

uint64_t warp_exchange(warp_op op, unsigned mask, uint64_t value, int param, int width, const std::source_location& loc) {
  fiber& f = current_fiber(op_name(op), loc);
  f.state = fstate::warp;
  f.site = loc;
  f.op = op;
  f.mask = mask;
  f.in = value;
  f.param = param;
  f.width = width;
  runner& r = *tl_runner;
  const int gen = r.warp_gen[f.warp] & 1;  // advanced when the __syncwarp completes
  const bool annotate = op == warp_op::syncwarp && !r.tsan_blocks;
  if (annotate) tsan::release(&r.sync_warp[f.warp][gen]);
  yield(r, f);
  if (annotate) tsan::acquire(&r.sync_warp[f.warp][gen]);
  return f.out;
}

void* static_shared(const void* key, size_t bytes, size_t align, const char* type_name) {
  current_fiber("a __shared__ variable", std::source_location::current());
  runner& r = *tl_runner;
  for (const shared_slot& s : r.slots)
    if (s.key == key) return r.smem + s.off;
  const size_t off = (r.static_end + align - 1) / align * align, end = off + bytes;
  if (end - r.dyn_end > kStaticSmemLimit || end > r.k->smem_optin || end > kSmemBytes)
    throw fault_error("static shared memory (" + std::to_string(end - r.dyn_end) + " B, the last " + type_name +
                      ") plus dynamic (" + std::to_string(r.k->dyn_smem) + " B) exceeds the limits (48 KiB static, " +
                      std::to_string(r.k->smem_optin) + " B in all)");
#if CONVEYOR_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(r.smem + off, bytes);
#endif
  {
    [[maybe_unused]] tsan::unrecorded garbage;  // no thread's write: the first thread to declare it fills it
    std::memset(r.smem + off, poison_byte(), bytes);
  }
  r.static_end = end;
  r.slots.push_back({key, off});
  return r.smem + off;
}

void check_shared_range(const void* p, size_t bytes, const std::source_location& loc) {
  const runner* r = tl_runner;
  const size_t off = reinterpret_cast<uintptr_t>(p) - (r ? reinterpret_cast<uintptr_t>(r->smem) : 0);
  if (!r || !r->k || off >= kSmemBytes) return;  // not in the block's shared memory (off wraps below it)
  if (const size_t have = r->slots.empty() ? r->k->dyn_smem : r->static_end; off + bytes > have)
    throw fault_error("shared memory [" + std::to_string(off) + ", " + std::to_string(off + bytes) + ") runs past the block's " +
                      std::to_string(have) + " B at " + where(loc));
}

void* dynamic_shared() {
  current_fiber("dynamic shared memory", std::source_location::current());
  return tl_runner->smem;
}

void device_fault(const char* what, const std::source_location& loc) { throw fault_error(std::string(what) + " at " + where(loc)); }

void reseed_thread_order(uint64_t seed) {
  if (tl_runner) tl_runner->rng.seed(seed);
}

} // namespace conveyor_emu::detail
