#include "model/thread_pool.hpp"

namespace conveyor::model {

thread_pool::thread_pool(int32_t n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  for (int32_t t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { work(t); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void thread_pool::drain(int32_t thread) {
  for (int64_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) (*fn_)(i, thread);
}

void thread_pool::work(int32_t thread) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(thread);
    std::lock_guard lk(mu_);
    if (--busy_ == 0) done_.notify_one();
  }
}

void thread_pool::parallel_for(int64_t n, const std::function<void(int64_t, int32_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  {
    std::lock_guard lk(mu_);
    fn_ = &fn;
    n_ = n;
    next_.store(0);
    busy_ = static_cast<int32_t>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  std::unique_lock lk(mu_);
  done_.wait(lk, [&] { return busy_ == 0; });
  fn_ = nullptr;
}

} // namespace conveyor::model
