#include "tools/trace/slots.hpp"

#include <functional>
#include <queue>

namespace conveyor::trace {

slot_layout assign_slots(std::span<const step_record> steps, size_t num_jobs) {
  // Each job's last step in the window, then the jobs leaving after each step.
  std::vector<int64_t> last(num_jobs, -1);
  for (size_t i = 0; i < steps.size(); ++i)
    for (const seq_record& s : steps[i].seqs) last[s.job] = static_cast<int64_t>(i);
  std::vector<std::vector<int32_t>> leaving(steps.size());
  for (size_t j = 0; j < num_jobs; ++j)
    if (last[j] >= 0) leaving[last[j]].push_back(static_cast<int32_t>(j));

  slot_layout out;
  out.slot.resize(steps.size());
  std::vector<int32_t> held(num_jobs, -1);
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> free_slots;
  for (size_t i = 0; i < steps.size(); ++i) {
    out.slot[i].reserve(steps[i].seqs.size());
    for (const seq_record& s : steps[i].seqs) {
      int32_t& h = held[s.job];
      if (h < 0) {
        if (free_slots.empty()) {
          h = out.num_slots++;
        } else {
          h = free_slots.top();
          free_slots.pop();
        }
      }
      out.slot[i].push_back(h);
    }
    for (int32_t j : leaving[i]) {
      free_slots.push(held[j]);
      held[j] = -1;
    }
  }
  return out;
}

} // namespace conveyor::trace
