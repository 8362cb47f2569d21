// ThreadSanitizer as the emulator's race detector (a -DCONVEYOR_TSAN=ON build, scripts/gpu_emu_tsan.sh;
// docs/gpu-emulator.md "Races"). Each CUDA thread is a TSan fiber and switching between fibers
// orders nothing, so TSan sees the block's threads as truly concurrent; the only happens-before
// edges are the ones CUDA promises: the host's work before a launch precedes the kernel, the
// kernel precedes the host's work after it, __syncthreads orders the block and __syncwarp the
// warp. Shuffles and votes order no memory (racecheck on an H200 flagged code that relied on
// them). The emulator's own sources are built without instrumentation. Blocks run one after the
// other, and the host refills shared memory between them: each block's threads are ordered
// after the previous block's (so races between blocks are not looked for, as racecheck does not).
// CONVEYOR_EMU_TSAN (set by CMake with CONVEYOR_TSAN: these sources are built without
// -fsanitize=thread, so __SANITIZE_THREAD__ is not defined here); outside it every hook is a no-op.
#pragma once

#include <cstddef>

#if CONVEYOR_EMU_TSAN
#include <sanitizer/tsan_interface.h>
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace conveyor_emu::detail::tsan {

#if CONVEYOR_EMU_TSAN
inline void* current() { return __tsan_get_current_fiber(); }
inline void* create() { return __tsan_create_fiber(0); }
inline void switch_to(void* fiber) { __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync); }
inline void acquire(void* addr) { __tsan_acquire(addr); }
inline void release(void* addr) { __tsan_release(addr); }
/// Writes the running fiber makes until the guard goes are no thread's (the emulator's garbage).
struct unrecorded_writes {
  unrecorded_writes() { AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
  ~unrecorded_writes() { AnnotateIgnoreWritesEnd(__FILE__, __LINE__); }
  unrecorded_writes(const unrecorded_writes&) = delete;
  unrecorded_writes& operator=(const unrecorded_writes&) = delete;
};
#else
inline void* current() { return nullptr; }
inline void* create() { return nullptr; }
inline void switch_to(void*) {}
inline void acquire(void*) {}
inline void release(void*) {}
struct unrecorded_writes {};
#endif

} // namespace conveyor_emu::detail::tsan
