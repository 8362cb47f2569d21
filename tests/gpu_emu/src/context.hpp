// Execution contexts for the emulator's fibers: a guarded stack, "make" (a context that will run
// entry(arg) on that stack) and "switch". On x86-64 the switch is a few instructions that save
// the callee-saved registers, MXCSR and the x87 control word (no system call: an emulated
// __syncthreads switches every thread of the block); elsewhere it is ucontext's swapcontext.
#pragma once

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace conveyor_emu::detail {

struct exec_context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc{};
#endif
};

/// A stack of `bytes` with a PROT_NONE guard page below it; returns its lowest usable byte.
char* new_fiber_stack(size_t bytes);
/// Prepares `c` to run entry(arg) on [stack, stack + bytes) when first switched to. entry must
/// never return (it switches away for good).
void make_context(exec_context& c, char* stack, size_t bytes, void (*entry)(long), long arg);
/// Saves the running context in `from` and resumes `to`.
void switch_context(exec_context& from, exec_context& to);

} // namespace conveyor_emu::detail
