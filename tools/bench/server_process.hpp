// A `conveyor serve` child process for `conveyor bench --compare-batching`: started with
// posix_spawn, its stdout and stderr going to a log file, stopped with SIGTERM (the server's
// drain) and, if it has not exited within the grace period, SIGKILL. The destructor stops it,
// so an exception on the bench side never leaves a server running.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace conveyor::bench {

class server_process {
public:
  /// Starts `binary` with `args` (argv[1..]). Throws std::runtime_error when it cannot start.
  server_process(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path);
  ~server_process();
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;

  /// Still running (reaps it if it has exited).
  bool running();
  /// SIGTERM, wait up to `grace_s`, then SIGKILL. Returns the exit status as the shell prints
  /// it (128 + signal when killed). Idempotent.
  int stop(double grace_s = 30.0);
  /// The last `max_lines` lines of the log, for error messages.
  std::string log_tail(int max_lines = 12) const;

private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string log_path_;
};

/// The running executable (/proc/self/exe), to start `conveyor serve` from `conveyor bench`.
std::string self_executable();

} // namespace conveyor::bench
