// An array whose memory is reserved, not touched: an anonymous private mapping (MAP_NORESERVE)
// reads as zeros and commits a page the first time it is written, so a large KV pool costs
// address space at start and resident memory only as sequences fill it. A written page stays
// committed (reused hot) until the array goes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conveyor::model {

class lazy_bytes {
public:
  lazy_bytes() = default;
  /// Reserves `bytes` (zero-filled on first touch). Throws std::bad_alloc when the address space
  /// cannot be had.
  explicit lazy_bytes(size_t bytes);
  lazy_bytes(lazy_bytes&& o) noexcept;
  lazy_bytes& operator=(lazy_bytes&& o) noexcept;
  lazy_bytes(const lazy_bytes&) = delete;
  lazy_bytes& operator=(const lazy_bytes&) = delete;
  ~lazy_bytes();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  /// Bytes of the mapping in memory now (pages touched; mincore).
  size_t resident_bytes() const;

private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

/// `n` values of T in a lazy_bytes.
template <class T>
class lazy_array {
public:
  lazy_array() = default;
  explicit lazy_array(size_t n) : mem_(n * sizeof(T)), n_(n) {}
  T* data() { return static_cast<T*>(mem_.data()); }
  const T* data() const { return static_cast<const T*>(mem_.data()); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t resident_bytes() const { return mem_.resident_bytes(); }

private:
  lazy_bytes mem_;
  size_t n_ = 0;
};

} // namespace conveyor::model
