// `conveyor keygen [--out-dir DIR] [--name NAME]`: a fresh CURVE key pair for `serve
// --curve-secret-key` (the server's pair) or for a client (its NAME.pub goes into the server's
// --authorized-keys file). Writes DIR/NAME.key (mode 0600: `public-key = ..` and `secret-key = ..`)
// and DIR/NAME.pub (the public key alone); prints the public key on stdout. Never overwrites a
// file: if either exists, a one-line error and exit 2.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "tools/command.hpp"
#include "tools/commands.hpp"
#include "transport/curve.hpp"

namespace conveyor::tools {
namespace {

struct keygen_opts {
  std::string out_dir = ".";
  std::string name = "conveyor";
};

// Creates `path` (which must not exist) with `mode` and writes `text`. Returns "" or the error.
std::string write_new(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0) return std::strerror(errno);
  ::fchmod(fd, mode);  // exactly `mode`, whatever the umask
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err ? std::strerror(err) : "";
}

int run_keygen(const keygen_opts& o) {
  namespace fs = std::filesystem;
  if (o.name.empty() || o.name.find('/') != std::string::npos) {
    spdlog::error("conveyor keygen: --name '{}' must be a plain file name (no '/'); use --out-dir for the folder", o.name);
    return 2;
  }
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) {
    spdlog::error("conveyor keygen: cannot create --out-dir {}: {}; pick a writable folder", o.out_dir, ec.message());
    return 2;
  }
  const std::string key_path = (fs::path(o.out_dir) / (o.name + ".key")).string();
  const std::string pub_path = (fs::path(o.out_dir) / (o.name + ".pub")).string();
  for (const auto& p : {key_path, pub_path}) {
    if (fs::exists(p, ec)) {
      spdlog::error("conveyor keygen: {} exists; refusing to overwrite a key (pick another --name or --out-dir, or delete it)", p);
      return 2;
    }
  }
  transport::curve_keypair kp;
  try {
    kp = transport::generate_curve_keypair();
  } catch (const transport::curve_error& e) {
    spdlog::error("conveyor keygen: {}", e.what());
    return 1;
  }
  const std::string secret_text = "# CURVE key pair written by `conveyor keygen`; keep this file secret.\n"
                                  "public-key = " + kp.public_key + "\nsecret-key = " + kp.secret_key + "\n";
  if (auto err = write_new(key_path, secret_text, 0600); !err.empty()) {
    spdlog::error("conveyor keygen: cannot write {}: {}; pick another --out-dir or --name", key_path, err);
    return 2;
  }
  if (auto err = write_new(pub_path, kp.public_key + "\n", 0644); !err.empty()) {
    fs::remove(key_path, ec);  // leave no half-written pair behind
    spdlog::error("conveyor keygen: cannot write {}: {}; pick another --out-dir or --name", pub_path, err);
    return 2;
  }
  spdlog::info("conveyor keygen: wrote {} (secret, mode 0600) and {} (public)", key_path, pub_path);
  std::cout << kp.public_key << "\n";
  return 0;
}

} // namespace

void register_keygen(CLI::App& app, int& exit_code) {
  auto [cmd, o] = add_command<keygen_opts>(
      app, exit_code, "keygen", "Write a CURVE key pair (NAME.key, NAME.pub) for serve --curve-secret-key / --authorized-keys",
      run_keygen);
  cmd->add_option("--out-dir", o->out_dir, "Folder for the two files")->capture_default_str();
  cmd->add_option("--name", o->name, "Base name: writes NAME.key and NAME.pub")->capture_default_str();
}

} // namespace conveyor::tools
