// spinning_pool: spin-then-block workers, and a caller that spins, then blocks, until every
// worker has checked in.
#include "model/cpu/qgemv_pool.hpp"
#include "model/cpu/cpu_cores.hpp"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CV_PAUSE() _mm_pause()
#else
#define CV_PAUSE() std::this_thread::yield()
#endif

namespace conveyor::model {

spinning_pool::spinning_pool(int32_t n_threads, int32_t spin_us) : spin_us_(spin_us) {
  if (n_threads <= 0) n_threads = usable_cores();
  for (int32_t t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { work(t); });
}

spinning_pool::~spinning_pool() {
  {
    std::lock_guard lk(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void spinning_pool::drain(int32_t thread) {
  for (int64_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) {
    (*fn_)(i, thread);
    if (completed_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_ && thread != 0) {
      std::lock_guard lk(mu_);  // the caller may be checking completed_ under mu_ right now
      if (caller_waits_) done_.notify_one();
    }
  }
}

void spinning_pool::work(int32_t thread) {
  uint64_t seen = 0;
  for (;;) {
    const int32_t spin_us = spin_us_.load(std::memory_order_relaxed);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
    for (uint32_t i = 1; generation_.load(std::memory_order_acquire) == seen && !stop_.load(); ++i) {
      if (spin_us > 0) CV_PAUSE();
      if (spin_us <= 0 || (i % 256 == 0 && std::chrono::steady_clock::now() > deadline)) {
        // generation_ changes only under mu_, so checking it under mu_ loses no wake-up.
        std::unique_lock lk(mu_);
        ++sleepers_;
        wake_.wait(lk, [&] { return stop_.load() || generation_.load() != seen; });
        --sleepers_;
      }
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    // Enter the loop only while it is open: the caller closes it, then waits for active_ to
    // drain (both seq_cst, so either this sees it closed or the caller sees this inside).
    active_.fetch_add(1);
    if (open_.load()) drain(thread);
    if (active_.fetch_sub(1) == 1) {
      std::lock_guard lk(mu_);
      if (caller_waits_) done_.notify_one();
    }
  }
}

void spinning_pool::parallel_for(int64_t n, const std::function<void(int64_t, int32_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  fn_ = &fn;
  n_ = n;
  next_.store(0);
  completed_.store(0);
  bool wake;
  {
    std::lock_guard lk(mu_);
    open_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) wake_.notify_all();
  drain(0);
  // Items still running on workers: spin for them as workers spin for work; then (or at once,
  // in blocking mode) sleep and leave this core to them. Then close the loop and wait for the
  // workers inside it to leave (they have no item left: a moment).
  wait_until([&] { return completed_.load(std::memory_order_acquire) == n; });
  open_.store(false);
  wait_until([&] { return active_.load() == 0; });
  fn_ = nullptr;
}

template <class Done>
void spinning_pool::wait_until(const Done& done) {
  const int32_t spin_us = spin_us_.load(std::memory_order_relaxed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (uint32_t i = 1; !done(); ++i) {
    if (spin_us > 0) CV_PAUSE();
    if (spin_us <= 0 || (i % 256 == 0 && std::chrono::steady_clock::now() > deadline)) {
      std::unique_lock lk(mu_);
      caller_waits_ = true;
      done_.wait(lk, done);
      caller_waits_ = false;
    }
  }
}

} // namespace conveyor::model
