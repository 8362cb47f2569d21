// Device memory arena: one cudaMalloc, carved by a bump pointer into 256-byte aligned pieces
// that live as long as the arena. Sizing runs the same carving code twice: first against a
// measuring arena (no memory, it only counts), then against the real one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor::gpu {

class device_arena {
public:
  /// A measuring arena: take() returns nullptr and only counts bytes.
  device_arena() = default;
  /// Allocates `bytes` on the current device. Throws std::runtime_error (with `what`) on failure.
  device_arena(size_t bytes, const std::string& what);
  ~device_arena();
  device_arena(device_arena&& o) noexcept;
  device_arena& operator=(device_arena&& o) noexcept;
  device_arena(const device_arena&) = delete;
  device_arena& operator=(const device_arena&) = delete;

  template <class T>
  T* take(int64_t n) {
    return static_cast<T*>(take_bytes(static_cast<size_t>(n) * sizeof(T)));
  }
  void* take_bytes(size_t bytes);

  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  bool measuring() const { return base_ == nullptr; }

private:
  char* base_ = nullptr;
  size_t used_ = 0, capacity_ = 0;
  std::string what_;
};

} // namespace conveyor::gpu
