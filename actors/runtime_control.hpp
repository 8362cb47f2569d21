// How the runtime's parts tell main() to stop: a signal, or a fatal executor failure. Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

namespace conveyor::actors {

class runtime_control {
public:
  /// The first call wins; later calls are ignored.
  void request_stop(int exit_code, std::string why) {
    {
      std::lock_guard lk(mu_);
      if (stopping_) return;
      stopping_ = true;
      exit_code_ = exit_code;
      why_ = std::move(why);
    }
    cv_.notify_all();
  }
  /// Blocks until request_stop() was called; returns its exit code.
  int wait() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stopping_; });
    return exit_code_;
  }
  /// request_stop() was called.
  bool stopping() const {
    std::lock_guard lk(mu_);
    return stopping_;
  }
  std::string why() const {
    std::lock_guard lk(mu_);
    return why_;
  }

private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int exit_code_ = 0;
  std::string why_;
};

} // namespace conveyor::actors
