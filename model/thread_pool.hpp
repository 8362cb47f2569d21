// A small fork-join pool for the CPU executor's per-token and per-head loops. Idle workers
// block on a condition variable (they never spin), so they do not steal cycles from
// OpenBLAS's own threads between GEMMs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace conveyor::model {

class thread_pool {
public:
  /// `n_threads` workers in all, the caller included; 0 = std::thread::hardware_concurrency().
  explicit thread_pool(int32_t n_threads = 0);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int32_t size() const { return static_cast<int32_t>(workers_.size()) + 1; }

  /// Calls fn(i, thread) for every i in [0, n), items handed out one at a time; `thread` is in
  /// [0, size()) and identifies per-thread scratch. Returns when every call has returned.
  void parallel_for(int64_t n, const std::function<void(int64_t i, int32_t thread)>& fn);

private:
  void work(int32_t thread);
  void drain(int32_t thread);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  int32_t busy_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int32_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
};

} // namespace conveyor::model
