#include "tools/bench/server_process.hpp"

#include <chrono>
#include <csignal>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace conveyor::bench {
namespace {

int shell_status(int raw) {
  if (WIFEXITED(raw)) return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) return 128 + WTERMSIG(raw);
  return -1;
}

} // namespace

server_process::server_process(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path)
    : log_path_(log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> argv_s{binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc));
  }
}

server_process::~server_process() { stop(5.0); }

bool server_process::running() {
  if (pid_ < 0) return false;
  int raw = 0;
  const pid_t r = ::waitpid(pid_, &raw, WNOHANG);
  if (r == pid_) {
    status_ = shell_status(raw);
    pid_ = -1;
    return false;
  }
  return r == 0;
}

int server_process::stop(double grace_s) {
  if (!running()) return status_;
  ::kill(pid_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (pid_ >= 0) {
    ::kill(pid_, SIGKILL);
    int raw = 0;
    while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
    }
    status_ = shell_status(raw);
    pid_ = -1;
  }
  return status_;
}

std::string server_process::log_tail(int max_lines) const {
  std::ifstream in(log_path_);
  std::deque<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    lines.push_back(l);
    if (static_cast<int>(lines.size()) > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "  | " + l + "\n";
  return out;
}

std::string self_executable() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error("cannot find the conveyor executable (/proc/self/exe)");
  std::string path(buf.data(), static_cast<size_t>(n));
  const std::string deleted = " (deleted)";
  if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    throw std::runtime_error("the conveyor binary was replaced while this ran (" + path +
                             "); run a copy that stays put, or do not rebuild meanwhile");
  return path;
}

} // namespace conveyor::bench
