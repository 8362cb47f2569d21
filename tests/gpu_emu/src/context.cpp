// Fiber contexts (context.hpp): a hand-written x86-64 switch, ucontext elsewhere.
#include "context.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

#if defined(__x86_64__)
extern "C" void conveyor_emu_switch(void** save_sp, void* load_sp);
extern "C" void conveyor_emu_trampoline();
// Saved frame, from the saved stack pointer up: MXCSR (4 B) and x87 control word (4 B), r15, r14,
// r13, r12, rbx, rbp, return address. A new context "returns" into the trampoline, which calls
// entry (r13) with arg (r12) on a 16-byte aligned stack.
asm(R"(
  .text
  .p2align 4
  .globl conveyor_emu_switch
  .hidden conveyor_emu_switch
  .type conveyor_emu_switch, @function
conveyor_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size conveyor_emu_switch, .-conveyor_emu_switch

  .p2align 4
  .globl conveyor_emu_trampoline
  .hidden conveyor_emu_trampoline
  .type conveyor_emu_trampoline, @function
conveyor_emu_trampoline:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size conveyor_emu_trampoline, .-conveyor_emu_trampoline
)");
#endif

namespace conveyor_emu::detail {

char* new_fiber_stack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("CUDA emulator: cannot map a fiber stack");
  mprotect(p, page, PROT_NONE);  // an overflow faults instead of corrupting the neighbour
  return static_cast<char*>(p) + page;
}

#if defined(__x86_64__)

void make_context(exec_context& c, char* stack, size_t bytes, void (*entry)(long), long arg) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<uint64_t*>(top - 16);  // the trampoline runs with rsp = top - 16
  *--frame = reinterpret_cast<uint64_t>(&conveyor_emu_trampoline);
  *--frame = 0;                                   // rbp
  *--frame = 0;                                   // rbx
  *--frame = static_cast<uint64_t>(arg);          // r12
  *--frame = reinterpret_cast<uint64_t>(entry);   // r13
  *--frame = 0;                                   // r14
  *--frame = 0;                                   // r15
  *--frame = uint64_t{0x1F80} | (uint64_t{0x037F} << 32);  // default MXCSR and x87 control word
  c.sp = frame;
}

void switch_context(exec_context& from, exec_context& to) { conveyor_emu_switch(&from.sp, to.sp); }

#else

namespace {
void (*tl_entry)(long) = nullptr;
void ucontext_entry(int hi, int lo) {
  tl_entry(static_cast<long>((static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32) | static_cast<uint32_t>(lo)));
}
} // namespace

void make_context(exec_context& c, char* stack, size_t bytes, void (*entry)(long), long arg) {
  tl_entry = entry;  // one entry function per process (the block scheduler's)
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  const auto a = static_cast<uint64_t>(arg);
  makecontext(&c.uc, reinterpret_cast<void (*)()>(ucontext_entry), 2, static_cast<int>(a >> 32), static_cast<int>(a & 0xFFFFFFFFu));
}

void switch_context(exec_context& from, exec_context& to) { swapcontext(&from.uc, &to.uc); }

#endif

} // namespace conveyor_emu::detail
