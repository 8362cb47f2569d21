// The iteration trace (`conveyor serve --trace FILE`): one JSON line per executor step, after a
// header line; `conveyor trace` draws it. docs/architecture.md ("Iteration trace") has the format.
// Not an actor: the scheduler actor calls begin_step() / end_step() around each step, and a
// flusher thread of its own does all file I/O (buffered; flushed every second and at close), so
// the actor never blocks on the disk. A write failure is logged once and turns tracing off.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/scheduler.hpp"
#include "engine/step.hpp"

namespace conveyor::actors {

/// The trace file cannot be opened or written at start-up.
class trace_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What the header line says about the server.
struct trace_header {
  batching_mode batching = batching_mode::continuous;
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  int32_t num_kv_blocks = 0;
  int32_t block_size = 0;
  std::string model;
};

/// Returns the job id of a live sequence, or nullptr when it has none.
using job_namer = std::function<const std::string*(seq_id)>;

class trace_writer {
public:
  /// The `version` field of the header; `conveyor trace` refuses other versions.
  static constexpr int format_version = 1;

  /// Creates (truncates) `path` and writes the header line through to the file. `start_s` is
  /// "server start" on the now_s() clock; steps' `start_s` count from it.
  /// Throws trace_error naming the path and the reason when the file cannot be written.
  trace_writer(const std::string& path, const trace_header& header, double start_s);
  /// Flushes what is buffered and closes the file (as close()).
  ~trace_writer();

  /// Right before `plan` goes to the executor: records its sequences (job id, tokens, prompt or
  /// decode, sample) and the scheduler's gauges after planning (KV blocks, queue, running,
  /// preemptions since the previous step).
  void begin_step(const step_plan& plan, const scheduler& sched, const job_namer& job_of, double now_s);
  /// When the step's result (or error) is back: the record gets its duration and is buffered.
  /// Steps end in the order they began; a pipelined step (begun while the one before still ran)
  /// starts, in the record, when the one before ended: durations are the executor's time each.
  /// `accepted`: drafted tokens that stood in this step (speculative decoding).
  void end_step(double now_s, int64_t accepted = 0);
  /// Stops the flusher thread, writes what is buffered, closes the file. Idempotent.
  void close();
  /// False once a write failed (or after close()): records are dropped.
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

private:
  void flusher_loop();
  // Writes buffer_ to the file; on failure logs once and disables. Holds io_mu_.
  void write_out(std::string& chunk);

  std::string path_;
  double start_s_ = 0.0;
  std::FILE* file_ = nullptr;
  std::atomic<bool> enabled_{true};
  // Scheduler-actor side (one caller at a time): the step being recorded.
  // Steps begun and not yet ended, oldest first: two while steps are pipelined.
  struct pending_step {
    uint64_t step = 0;
    double start_s = 0.0;
    std::string body;
  };
  std::deque<pending_step> pending_;
  double last_end_s_ = -1.0;
  int64_t last_preemptions_ = 0;
  // Shared with the flusher thread.
  std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;
  bool stop_ = false;
  std::mutex io_mu_;
  std::thread flusher_;
};

} // namespace conveyor::actors
