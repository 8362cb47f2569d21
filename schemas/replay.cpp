#include "schemas/replay.hpp"

#include <algorithm>

namespace conveyor::schemas {

replayed replay(std::vector<job_event> events) {
  std::stable_sort(events.begin(), events.end(), [](const job_event& a, const job_event& b) { return seq_of(a) < seq_of(b); });
  replayed r;
  for (size_t i = 0; i < events.size(); ++i) {
    const job_event& ev = events[i];
    if (seq_of(ev) + 1 == r.at.next_seq) continue;  // the same seq again (a repeat JetStream kept)
    if (seq_of(ev) != r.at.next_seq || r.end) {
      r.after_gap = events.size() - i;
      break;
    }
    if (auto* t = std::get_if<tokens_event>(&ev)) r.at.published.insert(r.at.published.end(), t->token_ids.begin(), t->token_ids.end());
    if (is_terminal(ev)) r.end = ev;
    ++r.at.next_seq;
  }
  return r;
}

} // namespace conveyor::schemas
