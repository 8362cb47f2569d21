// gguf_file: maps the file read-only, hands the bytes to parse_gguf(), and answers typed queries.
// The mapping lives as long as the gguf_file, so tensor_data() pointers need no copy. An
// assembled view (gguf_assemble.cpp) answers the same queries from memory it was handed.
// Getter type mismatches are gguf_errors naming the key, its type and the type asked for.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "model/formats/gguf.hpp"
#include "model/formats/gguf_contents.hpp"

namespace conveyor::model {

gguf_value_type gguf_value::type() const { return static_cast<gguf_value_type>(v.index()); }

gguf_file::impl::~impl() {
  if (map != nullptr) {
    ::munmap(map, map_size);
  }
}

namespace {

bool is_integer(gguf_value_type t) {
  switch (t) {
  case gguf_value_type::u8: case gguf_value_type::i8: case gguf_value_type::u16: case gguf_value_type::i16:
  case gguf_value_type::u32: case gguf_value_type::i32: case gguf_value_type::u64: case gguf_value_type::i64:
    return true;
  default:
    return false;
  }
}

/// Converts an integer-typed value; false if it is not an integer or does not fit int64.
bool to_int64(const gguf_value& v, int64_t& out) {
  if (!is_integer(v.type())) {
    return false;
  }
  return std::visit(
      [&out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_same_v<T, uint64_t>) {
            if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
              return false;
            }
          }
          out = static_cast<int64_t>(x);
          return true;
        } else {
          return false;
        }
      },
      v.v);
}

std::string describe(const gguf_value& v) {
  if (v.type() != gguf_value_type::array) {
    return value_type_name(v.type());
  }
  return "array of " + value_type_name(std::get<gguf_array>(v.v).elem_type);
}

} // namespace

gguf_file gguf_file::open(const std::string& path) {
  auto p = std::make_unique<impl>();
  p->path = path;
  // O_NONBLOCK: opening a FIFO must not hang; it is then rejected as not a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    p->fail(std::string("cannot open: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    p->fail(std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    p->fail(S_ISDIR(st.st_mode) ? "is a directory, not a GGUF file" : "not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > 0) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (m == MAP_FAILED) {
      p->fail(std::string("cannot mmap: ") + std::strerror(err));
    }
    p->map = m;
    p->map_size = size;
  } else {
    ::close(fd);
  }
  p->c = parse_gguf(static_cast<const uint8_t*>(p->map), size, path);
  return gguf_file(std::move(p));
}

gguf_file::gguf_file(std::unique_ptr<impl> p) : p_(std::move(p)) {}
gguf_file::gguf_file(gguf_file&&) noexcept = default;
gguf_file& gguf_file::operator=(gguf_file&&) noexcept = default;
gguf_file::~gguf_file() = default;

void gguf_file::release_pages(const uint8_t* p, size_t n) const {
  const auto* base = static_cast<const uint8_t*>(p_->map);
  if (base == nullptr || p < base || n > p_->map_size || p - base > static_cast<std::ptrdiff_t>(p_->map_size - n)) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

const std::string& gguf_file::path() const { return p_->path; }
uint32_t gguf_file::version() const { return p_->c.version; }
uint32_t gguf_file::alignment() const { return p_->c.alignment; }

const gguf_value* gguf_file::find(std::string_view key) const {
  const auto it = p_->c.kv_index.find(key);
  return it == p_->c.kv_index.end() ? nullptr : &p_->c.kvs[it->second].second;
}

std::optional<int64_t> gguf_file::get_int(std::string_view key) const {
  const gguf_value* v = find(key);
  if (v == nullptr) {
    return std::nullopt;
  }
  int64_t out = 0;
  if (!is_integer(v->type())) {
    p_->fail("metadata '" + std::string(key) + "' has type " + describe(*v) + ", expected an integer");
  }
  if (!to_int64(*v, out)) {
    p_->fail("metadata '" + std::string(key) + "' value " + std::to_string(std::get<uint64_t>(v->v)) +
             " does not fit in int64");
  }
  return out;
}

std::optional<double> gguf_file::get_float(std::string_view key) const {
  const gguf_value* v = find(key);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (v->type() == gguf_value_type::f32) {
    return std::get<float>(v->v);
  }
  if (v->type() == gguf_value_type::f64) {
    return std::get<double>(v->v);
  }
  p_->fail("metadata '" + std::string(key) + "' has type " + describe(*v) + ", expected f32 or f64");
}

std::optional<bool> gguf_file::get_bool(std::string_view key) const {
  const gguf_value* v = find(key);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (v->type() != gguf_value_type::boolean) {
    p_->fail("metadata '" + std::string(key) + "' has type " + describe(*v) + ", expected bool");
  }
  return std::get<bool>(v->v);
}

std::optional<std::string> gguf_file::get_string(std::string_view key) const {
  const gguf_value* v = find(key);
  if (v == nullptr) {
    return std::nullopt;
  }
  if (v->type() != gguf_value_type::string) {
    p_->fail("metadata '" + std::string(key) + "' has type " + describe(*v) + ", expected string");
  }
  return std::get<std::string>(v->v);
}

std::vector<std::string> gguf_file::get_string_array(std::string_view key) const {
  const gguf_value* v = find(key);
  if (v == nullptr) {
    return {};
  }
  if (v->type() != gguf_value_type::array || std::get<gguf_array>(v->v).elem_type != gguf_value_type::string) {
    p_->fail("metadata '" + std::string(key) + "' has type " + describe(*v) + ", expected array of string");
  }
  std::vector<std::string> out;
  const auto& items = std::get<gguf_array>(v->v).items;
  out.reserve(items.size());
  for (const gguf_value& item : items) {
    out.push_back(std::get<std::string>(item.v));
  }
  return out;
}

std::vector<int64_t> gguf_file::get_int_array(std::string_view key) const {
  const gguf_value* v = find(key);
  if (v == nullptr) {
    return {};
  }
  if (v->type() != gguf_value_type::array || !is_integer(std::get<gguf_array>(v->v).elem_type)) {
    p_->fail("metadata '" + std::string(key) + "' has type " + describe(*v) + ", expected array of integers");
  }
  const auto& items = std::get<gguf_array>(v->v).items;
  std::vector<int64_t> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (!to_int64(items[i], out[i])) {
      p_->fail("metadata '" + std::string(key) + "' element " + std::to_string(i) + " does not fit in int64");
    }
  }
  return out;
}

std::vector<float> gguf_file::get_float_array(std::string_view key) const {
  const gguf_value* v = find(key);
  if (v == nullptr) {
    return {};
  }
  const auto elem = v->type() == gguf_value_type::array ? std::get<gguf_array>(v->v).elem_type
                                                         : gguf_value_type::array;
  if (elem != gguf_value_type::f32 && elem != gguf_value_type::f64) {
    p_->fail("metadata '" + std::string(key) + "' has type " + describe(*v) + ", expected array of f32 or f64");
  }
  const auto& items = std::get<gguf_array>(v->v).items;
  std::vector<float> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    out[i] = elem == gguf_value_type::f32 ? std::get<float>(items[i].v)
                                          : static_cast<float>(std::get<double>(items[i].v));
  }
  return out;
}

std::vector<std::string> gguf_file::keys() const {
  std::vector<std::string> out;
  out.reserve(p_->c.kvs.size());
  for (const auto& kv : p_->c.kvs) {
    out.push_back(kv.first);
  }
  return out;
}

const std::vector<gguf_tensor_info>& gguf_file::tensors() const { return p_->c.tensors; }

const gguf_tensor_info* gguf_file::find_tensor(std::string_view name) const {
  const auto it = p_->c.tensor_index.find(name);
  return it == p_->c.tensor_index.end() ? nullptr : &p_->c.tensors[it->second];
}

const uint8_t* gguf_file::tensor_data(const gguf_tensor_info& t) const {
  if (p_->assembled) {
    const auto it = p_->c.tensor_index.find(t.name);
    return it == p_->c.tensor_index.end() ? nullptr : p_->tensor_ptrs[it->second];
  }
  return static_cast<const uint8_t*>(p_->map) + p_->c.data_offset + t.offset;
}

} // namespace conveyor::model
