// Fatal sanitizer reports inside a kernel name the kernel. Every emulated build checks alignment
// (tests/gpu_emu/CMakeLists.txt: UBSan's -fsanitize=alignment, unrecoverable), as a GPU faults on
// a misaligned 16-byte (uint4, float4, bf16x8) or 8-byte access; the report names the source
// line, the address and the type, and the sanitizer's death callback below adds the launch, the
// block and the thread, which the report cannot know. The same callback serves ASan's reports.
#include <cstdio>

#include "scheduler.hpp"

extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace conveyor_emu::detail {
namespace {

void name_the_kernel() {
  const runner* r = tl_runner;
  if (!r || !r->k || r->current < 0) return;
  std::fprintf(stderr,
               "conveyor CUDA emulator: the fatal report above came from kernel %s, block (%u,%u,%u) of grid (%u,%u,%u), "
               "thread (%u,%u,%u)\n",
               r->k->name.c_str(), blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z, threadIdx.x, threadIdx.y,
               threadIdx.z);
}

} // namespace

void install_fault_report() {
  static const bool installed = [] {
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(name_the_kernel);
    return true;
  }();
  (void)installed;
}

} // namespace conveyor_emu::detail
