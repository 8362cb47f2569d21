// API keys for the HTTP door (OpenAI's `Authorization: Bearer <key>`, as vLLM's and llama.cpp's
// --api-key): keys from flags and from a file (one a line, `#` comments), the file re-read on
// reload() (SIGHUP). A presented key is checked in constant time: both sides are hashed
// (SHA-256, OpenSSL) and the digests compared with CRYPTO_memcmp against every key, so neither
// a key's bytes nor its length nor which key matched shows in the time taken.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::transport {

struct api_key_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class api_keys {
public:
  using digest = std::array<uint8_t, 32>;

  /// Keys from --api-key (each) and --api-key-file (empty: none). Throws api_key_error naming
  /// the file (or the flag) and the fix: unreadable file, an empty key, a key with spaces.
  api_keys(std::vector<std::string> flag_keys, std::string file);

  /// Any key is set: /v1 routes (and /metrics) require one.
  bool enabled() const;
  /// How many keys are set now.
  size_t count() const;
  /// Whether `authorization` (the header's value) is "Bearer <one of the keys>".
  bool allows(std::string_view authorization) const;
  /// Re-reads the file (the flags' keys stay). Returns "" or why the file was not taken (the
  /// keys in force then stay as they were).
  std::string reload();
  const std::string& file() const { return file_; }

private:
  static std::vector<digest> read_file(const std::string& path);

  std::vector<digest> flag_digests_;
  std::string file_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<digest>> all_;  // guarded by mu_ (the pointer; the vector is immutable)
};

/// Whether an HTTP bind address is loopback only (127.x, ::1, localhost).
bool is_loopback_host(const std::string& host);

} // namespace conveyor::transport
