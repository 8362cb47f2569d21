// ThreadSanitizer as the emulator's race detector (a -DCONVEYOR_TSAN=ON build, scripts/gpu_emu_tsan.sh;
// docs/gpu-emulator.md "Races"). Each CUDA thread is a TSan fiber and switching between fibers
// orders nothing, so TSan sees the block's threads as truly concurrent; the only happens-before
// edges are the ones CUDA promises: the host's work before a launch precedes the kernel, the
// kernel precedes the host's work after it, __syncthreads orders the block and __syncwarp the
// warp. Shuffles and votes order no memory (racecheck on an H200 flagged code that relied on
// them). The emulator's own sources are built without instrumentation. Blocks run one after the
// other (TSan builds never interleave them), and the host refills shared memory between them: each block's threads are ordered
// after the previous block's (so races between blocks are not looked for, as racecheck does not).
// CONVEYOR_EMU_TSAN (set by CMake with CONVEYOR_TSAN: these sources are built without
// -fsanitize=thread, so __SANITIZE_THREAD__ is not defined here); outside it every hook is a no-op.
#pragma once

#include <cstddef>

#if CONVEYOR_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace conveyor_emu::detail::tsan {

#if CONVEYOR_EMU_TSAN
inline constexpr bool enabled = true;  // a ThreadSanitizer build
/// CONVEYOR_EMU_TSAN_MODE=blocks: each block is one TSan fiber and blocks are not ordered, so two
/// blocks of one launch touching the same device memory (one writing, no atomic) is a reported
/// race; the threads of a block are then ordered (the default mode checks those).
inline bool blocks_mode() {
  static const bool b = [] {
    const char* m = std::getenv("CONVEYOR_EMU_TSAN_MODE");
    return m && std::strcmp(m, "blocks") == 0;
  }();
  return b;
}
inline void* current() { return __tsan_get_current_fiber(); }
inline void* create(const char* name) {
  void* f = __tsan_create_fiber(0);
  __tsan_set_fiber_name(f, name);
  return f;
}
inline void destroy(void* fiber) { __tsan_destroy_fiber(fiber); }
inline void switch_to(void* fiber) { __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync); }
inline void acquire(void* addr) { __tsan_acquire(addr); }
inline void release(void* addr) { __tsan_release(addr); }
/// Accesses the running fiber makes until the guard goes are no thread's (the emulator's own
/// fills and checks).
struct unrecorded {
  unrecorded() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
  ~unrecorded() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__), AnnotateIgnoreWritesEnd(__FILE__, __LINE__); }
  unrecorded(const unrecorded&) = delete;
  unrecorded& operator=(const unrecorded&) = delete;
};
/// Fresh zero pages over [p, p + bytes) (page-aligned): TSan forgets every access to them, which
/// no happens-before edge could do without ordering the blocks.
inline void fresh_pages(void* p, size_t bytes) {
  unrecorded quiet;  // mmap then resets TSan's shadow instead of recording a write
  mmap(p, bytes, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}
#else
inline constexpr bool enabled = false;
inline bool blocks_mode() { return false; }
inline void* current() { return nullptr; }
inline void* create(const char*) { return nullptr; }
inline void destroy(void*) {}
inline void switch_to(void*) {}
inline void acquire(void*) {}
inline void release(void*) {}
struct unrecorded {};
inline void fresh_pages(void*, size_t) {}
#endif

} // namespace conveyor_emu::detail::tsan
