// Bounds-checked little-endian reader over a byte range (the mmap'd GGUF file). Internal to the
// GGUF reader: every read checks the remaining length first and throws gguf_error
// "<path>: truncated: ..." instead of touching memory past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "model/formats/gguf.hpp"

namespace conveyor::model {

/// Sequential reader of GGUF primitives with a file-length check before every access.
class gguf_cursor {
public:
  /// `data[0, size)` is the whole file; `path` prefixes every error message.
  gguf_cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  const std::string& path() const { return path_; }

  /// Throws gguf_error("<path>: <problem>").
  [[noreturn]] void fail(const std::string& problem) const { throw gguf_error(path_ + ": " + problem); }

  /// Fails with a "truncated" message unless `n` more bytes exist; `what` names the field.
  void need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      fail("truncated: " + std::string(what) + " at byte " + std::to_string(pos_) + " needs " +
           std::to_string(n) + " bytes but the file has " + std::to_string(size_) + " bytes");
    }
  }

  /// Reads one little-endian trivially-copyable value.
  template <class T> T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  /// Reads a gguf_string (u64 length + bytes). The length is checked against the file before
  /// anything is allocated, and against `max_len`.
  std::string read_string(std::string_view what, uint64_t max_len = uint64_t{1} << 30) {
    const uint64_t len = read<uint64_t>(what);
    if (len > max_len) {
      fail(std::string(what) + " has length " + std::to_string(len) + " (limit " + std::to_string(max_len) +
           ")");
    }
    need(len, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  /// The first multiple of `alignment` (a power of two) at or after pos(); may lie past the end.
  uint64_t aligned_pos(uint64_t alignment) const { return (pos_ + alignment - 1) & ~(alignment - 1); }

private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

} // namespace conveyor::model
