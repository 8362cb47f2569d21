#include "model/cpu/lazy_array.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <utility>
#include <vector>

namespace conveyor::model {

lazy_bytes::lazy_bytes(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = p;
}

lazy_bytes::lazy_bytes(lazy_bytes&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

lazy_bytes& lazy_bytes::operator=(lazy_bytes&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

lazy_bytes::~lazy_bytes() {
  if (data_) ::munmap(data_, size_);
}

size_t lazy_bytes::resident_bytes() const {
  if (!data_) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size_ + page - 1) / page);
  if (::mincore(data_, size_, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1u;
  return n * page;
}

} // namespace conveyor::model
