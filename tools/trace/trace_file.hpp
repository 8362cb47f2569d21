// Pure. Reads an iteration trace (`conveyor serve --trace FILE`, written by actors/trace_writer):
// a header line, then one JSON line per step. Job ids are interned: a sequence entry names its
// job by index into `trace_file::jobs`, numbered in order of first appearance. A last line cut
// short (a server killed mid-write) is dropped and noted; any other bad line is an error.
#pragma once

#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::trace {

/// The format version this reader understands (the header's `version`).
inline constexpr int format_version = 1;

/// Not a trace, a trace of another version, or a malformed line. what() is one line,
/// "FILE:LINE: problem" (or "FILE: problem").
class trace_format_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct trace_header {
  std::string batching;  ///< "continuous" | "static"
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  int32_t num_kv_blocks = 0;
  int32_t block_size = 0;
  std::string model;
};

/// One sequence's share of a step.
struct seq_record {
  int32_t job = 0;         ///< index into trace_file::jobs
  int32_t num_tokens = 0;  ///< tokens computed this step
  bool prompt = false;     ///< a prompt chunk (or recompute); false: one decode token
  bool sample = false;     ///< a token was sampled after it
  int32_t drafts = 0;      ///< of num_tokens, drafted (speculative decoding)
};

struct step_record {
  int64_t step = 0;          ///< the engine's step id (1, 2, ...)
  double start_s = 0.0;      ///< seconds since server start when the plan was sent
  double duration_ms = 0.0;  ///< plan sent -> result back
  std::vector<seq_record> seqs;
  int32_t kv_blocks_used = 0;
  int32_t waiting = 0;
  int32_t running = 0;
  int64_t preemptions = 0;  ///< during this step's planning
  int64_t preemptions_total = 0;
  int64_t accepted = 0;     ///< drafted tokens that stood (speculative decoding)

  int32_t num_tokens() const;
};

struct trace_file {
  trace_header header;
  std::vector<std::string> jobs;  ///< job ids in order of first appearance
  std::vector<step_record> steps;
  /// The last line was cut short and dropped.
  bool truncated_tail = false;
};

/// Parses a whole trace; `name` prefixes error messages. Throws trace_format_error.
trace_file parse_trace(std::istream& in, const std::string& name);
/// Opens and parses `path`. Throws trace_format_error (also when it cannot be read).
trace_file read_trace(const std::string& path);

} // namespace conveyor::trace
