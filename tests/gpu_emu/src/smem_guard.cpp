// The guard band past a block's shared memory (Release builds; under ASan the same bytes are
// poisoned instead). On a GPU a store past the launch's dynamic size lands in another block's
// shared memory or faults; here it lands in the runner's buffer, so the band is filled with the
// poison byte (control.hpp) before the block and any byte that changed by its end is a fault.
#include <algorithm>
#include <cstring>
#include <string>

#include "internal.hpp"

namespace conveyor_emu::detail {

namespace {

size_t first_changed(const unsigned char* smem, size_t from, size_t to) {
  const unsigned char poison = poison_byte();
  for (size_t i = from; i < to; ++i)
    if (smem[i] != poison) return i;
  return to;
}

} // namespace

void check_smem_guard(const unsigned char* smem, size_t dyn, size_t dyn_end, size_t static_end, size_t guard_end) {
  // [dyn, dyn_end): padding before the static variables; [dyn_end, static_end): the static ones.
  const size_t pad_end = std::min(dyn_end, guard_end);
  size_t at = first_changed(smem, std::min(dyn, pad_end), pad_end);
  if (at == pad_end) {
    const size_t from = std::min(std::max(static_end, dyn), guard_end);
    at = first_changed(smem, from, guard_end);
    if (at == guard_end) return;
  }
  const size_t used = static_end > dyn_end ? static_end - dyn_end : 0;
  throw fault_error("shared memory written past the block's own at byte " + std::to_string(at) + " (dynamic " +
                    std::to_string(dyn) + " B from the launch" +
                    (used ? ", static " + std::to_string(used) + " B from byte " + std::to_string(dyn_end) : std::string()) +
                    "): the launch's dynamic size is smaller than what the kernel stores");
}

} // namespace conveyor_emu::detail
