// Test support: hand-made iteration traces in the format actors/trace_writer writes.
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::trace::testing {

inline std::string header_line(const std::string& batching = "continuous", int version = 1) {
  return "{\"format\":\"conveyor-trace\",\"version\":" + std::to_string(version) + ",\"batching\":\"" + batching +
         "\",\"max_num_seqs\":4,\"max_num_batched_tokens\":64,\"num_kv_blocks\":100,\"block_size\":16,"
         "\"model\":\"tiny\"}\n";
}

/// One sequence of a step: job id, tokens, prompt (true) or decode.
struct cell {
  std::string job;
  int n;
  bool prompt;
};

inline std::string step_line(int step, const std::vector<cell>& seqs, int waiting = 0, int kv = 10,
                             int preemptions = 0) {
  std::string s = "{\"step\":" + std::to_string(step) + ",\"start_s\":" + std::to_string(0.01 * step) +
                  ",\"duration_ms\":5.0,\"seqs\":[";
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (i > 0) s += ',';
    s += "{\"job\":\"" + seqs[i].job + "\",\"n\":" + std::to_string(seqs[i].n) + ",\"kind\":\"" +
         (seqs[i].prompt ? "prompt" : "decode") + "\",\"sample\":true}";
  }
  s += "],\"kv_blocks_used\":" + std::to_string(kv) + ",\"waiting\":" + std::to_string(waiting) +
       ",\"running\":" + std::to_string(seqs.size()) + ",\"preemptions\":" + std::to_string(preemptions) +
       ",\"preemptions_total\":" + std::to_string(preemptions) + "}\n";
  return s;
}

/// Decode-only steps: each entry lists the jobs in that step.
inline std::string decode_steps(const std::vector<std::vector<std::string>>& steps, int first_step = 1) {
  std::string s;
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<cell> cells;
    for (const auto& j : steps[i]) cells.push_back({j, 1, false});
    s += step_line(first_step + static_cast<int>(i), cells);
  }
  return s;
}

} // namespace conveyor::trace::testing
