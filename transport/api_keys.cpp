#include "transport/api_keys.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>

namespace conveyor::transport {
namespace {

api_keys::digest hash(std::string_view key) {
  api_keys::digest d{};
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), d.data());
  return d;
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// A key as OpenAI clients send it: printable, no spaces (it follows "Bearer ").
std::string check_key(const std::string& key) {
  if (key.empty()) return "is empty";
  for (unsigned char c : key)
    if (c <= 0x20 || c >= 0x7f) return "holds a space or a character outside printable ASCII";
  return {};
}

} // namespace

api_keys::api_keys(std::vector<std::string> flag_keys, std::string file) : file_(std::move(file)) {
  for (const auto& k : flag_keys) {
    if (auto why = check_key(k); !why.empty())
      throw api_key_error("--api-key: a key " + why + "; HINT: use printable ASCII without spaces (e.g. `openssl rand -hex 32`)");
    flag_digests_.push_back(hash(k));
  }
  auto all = std::make_shared<std::vector<digest>>(flag_digests_);
  if (!file_.empty()) {
    auto from_file = read_file(file_);
    all->insert(all->end(), from_file.begin(), from_file.end());
  }
  all_ = std::move(all);
}

std::vector<api_keys::digest> api_keys::read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw api_key_error("--api-key-file " + path + ": cannot be read; HINT: fix the path or its permissions");
  std::vector<digest> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (auto why = check_key(line); !why.empty())
      throw api_key_error("--api-key-file " + path + " line " + std::to_string(n) + ": the key " + why +
                          "; HINT: one key a line, printable ASCII without spaces, `#` for comments");
    out.push_back(hash(line));
  }
  if (out.empty())
    throw api_key_error("--api-key-file " + path + ": holds no key; HINT: one key a line (an empty file would lock every client out)");
  return out;
}

bool api_keys::enabled() const { return count() > 0; }

size_t api_keys::count() const {
  std::lock_guard lk(mu_);
  return all_->size();
}

bool api_keys::allows(std::string_view authorization) const {
  std::shared_ptr<const std::vector<digest>> keys;
  {
    std::lock_guard lk(mu_);
    keys = all_;
  }
  constexpr std::string_view scheme = "Bearer ";
  const bool has_scheme = authorization.size() > scheme.size() && authorization.substr(0, scheme.size()) == scheme;
  const digest presented = hash(has_scheme ? authorization.substr(scheme.size()) : std::string_view{});
  // Every key is compared, whatever matched: the time does not depend on which one did.
  int matched = 0;
  for (const auto& k : *keys) matched |= CRYPTO_memcmp(k.data(), presented.data(), k.size()) == 0 ? 1 : 0;
  return has_scheme && matched != 0;
}

std::string api_keys::reload() {
  if (file_.empty()) return {};
  std::vector<digest> from_file;
  try {
    from_file = read_file(file_);
  } catch (const api_key_error& e) {
    return e.what();
  }
  auto all = std::make_shared<std::vector<digest>>(flag_digests_);
  all->insert(all->end(), from_file.begin(), from_file.end());
  std::lock_guard lk(mu_);
  all_ = std::move(all);
  return {};
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

} // namespace conveyor::transport
