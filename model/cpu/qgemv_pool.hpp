// A fork-join pool whose idle workers spin for a short while before blocking, for the ~150
// short parallel loops of a decode step: waking a blocked thread costs 10-30 us on the 2-core
// VM (measured), as much as a whole small projection. The CPU executor's only pool.
//
// A good neighbour on shared cores: items are handed out one at a time to whichever thread is
// running, and a loop ends when its items are done, not when every worker has checked in. A
// worker the OS has descheduled (another process on the core) therefore never holds a loop up
// unless it is inside an item: the caller and the running workers take all the items, close the
// loop, and wait only for the workers that entered it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace conveyor::model {

class spinning_pool {
public:
  /// `n_threads` workers in all, the caller included (0 = usable_cores(): affinity and cgroup quota); idle workers
  /// spin `spin_us` microseconds after their last item before they block.
  explicit spinning_pool(int32_t n_threads = 0, int32_t spin_us = 200);
  ~spinning_pool();
  spinning_pool(const spinning_pool&) = delete;
  spinning_pool& operator=(const spinning_pool&) = delete;

  int32_t size() const { return static_cast<int32_t>(workers_.size()) + 1; }
  /// Changes how long idle workers, and a caller waiting for them, spin (0: they block at once,
  /// right when other threads, such as OpenBLAS's, need the cores).
  void set_spin_us(int32_t spin_us) { spin_us_.store(spin_us, std::memory_order_relaxed); }

  /// Calls fn(i, thread) for every i in [0, n), items handed out one at a time; `thread` is in
  /// [0, size()). Returns when every call has returned. Not reentrant; one caller at a time.
  void parallel_for(int64_t n, const std::function<void(int64_t i, int32_t thread)>& fn);

private:
  void work(int32_t thread);
  void drain(int32_t thread);
  template <class Done>
  void wait_until(const Done& done);

  std::vector<std::thread> workers_;
  std::atomic<int32_t> spin_us_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> open_{false};       // the current loop takes workers (fn_ and n_ are valid)
  std::atomic<int32_t> active_{0};      // workers inside the current loop
  std::atomic<int64_t> completed_{0};   // items of the current loop done
  std::atomic<int64_t> next_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int64_t, int32_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  int32_t sleepers_ = 0;       // guarded by mu_
  bool caller_waits_ = false;  // guarded by mu_
};

} // namespace conveyor::model
