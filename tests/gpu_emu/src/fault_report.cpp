// Fatal sanitizer reports inside a kernel name the kernel. Every emulated build checks alignment
// (tests/gpu_emu/CMakeLists.txt: UBSan's -fsanitize=alignment, unrecoverable), as a GPU faults on
// a misaligned 16-byte (uint4, float4, bf16x8) or 8-byte access; the report names the source
// line, the address and the type, and the sanitizer's death callback below adds the launch, the
// block and the thread, which the report cannot know. The same callback serves ASan's and TSan's
// fatal reports. With ASan or TSan, GCC links libubsan beside their runtime, and each runtime
// keeps its own callback: it is set in every sanitizer runtime the process has loaded.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstring>

#include "scheduler.hpp"

extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace conveyor_emu::detail {
namespace {

using set_callback = void (*)(void (*)(void));

void name_the_kernel() {
  const runner* r = tl_runner;
  if (!r || !r->k || r->current < 0) return;
  std::fprintf(stderr,
               "conveyor CUDA emulator: the fatal report above came from kernel %s, block (%u,%u,%u) of grid (%u,%u,%u), "
               "thread (%u,%u,%u)\n",
               r->k->name.c_str(), blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z, threadIdx.x, threadIdx.y,
               threadIdx.z);
}

int set_in_runtime(dl_phdr_info* info, size_t, void*) {
  const char* name = info->dlpi_name;
  if (!name || !(std::strstr(name, "libubsan") || std::strstr(name, "libasan") || std::strstr(name, "libtsan"))) return 0;
  if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
    if (auto set = reinterpret_cast<set_callback>(dlsym(h, "__sanitizer_set_death_callback"))) set(name_the_kernel);
    dlclose(h);
  }
  return 0;
}

} // namespace

void install_fault_report() {
  static const bool installed = [] {
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(name_the_kernel);  // a static runtime
    dl_iterate_phdr(set_in_runtime, nullptr);
    return true;
  }();
  (void)installed;
}

} // namespace conveyor_emu::detail
