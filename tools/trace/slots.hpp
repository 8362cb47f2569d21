// Pure. Batch slots for drawing a trace: the rows of `conveyor trace`'s picture. A job holds one
// slot from its first to its last step in the window (steps in between where it computed nothing,
// say while preempted, stay blank in its row); after its last step the slot is free again, and a
// job entering takes the lowest free slot. So in static batching a batch's jobs stay in rows
// 0..k-1 until the batch ends, and in continuous batching a finished job's row is refilled at once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tools/trace/trace_file.hpp"

namespace conveyor::trace {

struct slot_layout {
  /// slot[i][k]: the row of steps[i].seqs[k].
  std::vector<std::vector<int32_t>> slot;
  /// Rows used (the most jobs holding a slot at once).
  int32_t num_slots = 0;
};

/// Assigns slots over `steps` (a window of a trace; jobs are indices into trace_file::jobs,
/// below `num_jobs`).
slot_layout assign_slots(std::span<const step_record> steps, size_t num_jobs);

} // namespace conveyor::trace
