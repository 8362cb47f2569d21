// safetensors reader: maps the file, checks the header length against the file, parses the JSON
// header (bounded depth), and checks every tensor's dtype, shape, byte range and alignment against
// the data section before any pointer into it is handed out.
#include "model/formats/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "model/formats/hf_json.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::model {
namespace {

constexpr uint64_t max_header_bytes = 100'000'000;  // the safetensors library's own limit
constexpr size_t max_rank = 8;

struct dtype_size {
  std::string_view name;
  uint32_t bytes;
};
constexpr dtype_size kDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"U64", 8}, {"I32", 4}, {"U32", 4},
    {"I16", 2}, {"U16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
};

[[noreturn]] void fail(const std::string& path, const std::string& problem) { throw model_error(path + ": " + problem); }

/// `data` is the data section, `data_offset` bytes into the file.
safetensors_tensor read_entry(const std::string& name, const nlohmann::json& e, uint64_t data_size,
                              const uint8_t* data, uint64_t data_offset, const std::string& path) {
  const std::string ctx = "tensor '" + name + "'";
  if (!e.is_object()) fail(path, ctx + " header entry is not an object");
  const auto dt = e.find("dtype"), sh = e.find("shape"), off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) fail(path, ctx + " has no dtype string");
  if (sh == e.end() || !sh->is_array()) fail(path, ctx + " has no shape array");
  if (off == e.end() || !off->is_array() || off->size() != 2) fail(path, ctx + " has no data_offsets [begin, end]");
  safetensors_tensor t;
  t.name = name;
  t.dtype = dt->get<std::string>();
  const uint32_t elem = safetensors_dtype_size(t.dtype);
  if (elem == 0) fail(path, ctx + " has unknown dtype '" + t.dtype + "'");
  if (sh->size() > max_rank) fail(path, ctx + " has " + std::to_string(sh->size()) + " dimensions");
  uint64_t nbytes = elem;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
      fail(path, ctx + " has shape entry " + d.dump() + ", expected a non-negative integer");
    const uint64_t n = d.get<uint64_t>();
    if (n > uint64_t{1} << 40 || __builtin_mul_overflow(nbytes, n, &nbytes))
      fail(path, ctx + " has a shape whose byte size overflows");
    t.shape.push_back(static_cast<int64_t>(n));
  }
  for (const auto& o : *off)
    if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
      fail(path, ctx + " has data offset " + o.dump() + ", expected a non-negative integer");
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end || end > data_size)
    fail(path, ctx + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] outside the data section of " + std::to_string(data_size) + " bytes (truncated file?)");
  if (end - begin != nbytes)
    fail(path, ctx + " holds " + std::to_string(end - begin) + " bytes but its dtype and shape need " +
                   std::to_string(nbytes));
  // The safetensors library pads the header to 8 bytes, so its tensors are aligned; anything
  // else would be read through misaligned float pointers.
  if (reinterpret_cast<uintptr_t>(data + begin) % elem != 0)
    fail(path, ctx + " data at file offset " + std::to_string(data_offset + begin) + " is not aligned to its " +
                   std::to_string(elem) + "-byte " + t.dtype +
                   " elements (header length not a multiple of 8?); HINT: save the model again with the safetensors library");
  t.data = data + begin;
  t.nbytes = nbytes;
  return t;
}

} // namespace

uint32_t safetensors_dtype_size(std::string_view dtype) {
  for (const dtype_size& d : kDtypes)
    if (d.name == dtype) return d.bytes;
  return 0;
}

std::vector<safetensors_tensor> parse_safetensors(const uint8_t* data, uint64_t size, const std::string& path) {
  if (size < 8) fail(path, "not a safetensors file (only " + std::to_string(size) + " bytes, no header length)");
  uint64_t n = 0;
  std::memcpy(&n, data, 8);  // little-endian, as every machine conveyor runs on
  if (n > size - 8)
    fail(path, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
                   " bytes): truncated or not a safetensors file");
  if (n > max_header_bytes) fail(path, "header length " + std::to_string(n) + " is over the 100 MB limit");
  const std::string_view text(reinterpret_cast<const char*>(data + 8), n);
  if (text.empty() || text.front() != '{') fail(path, "header does not start with '{': not a safetensors file");
  const nlohmann::json header = parse_json_bounded(text, path + " (header)");
  if (!header.is_object()) fail(path, "header is not a JSON object");
  const uint8_t* body = data + 8 + n;
  const uint64_t body_size = size - 8 - n;
  std::vector<safetensors_tensor> out;
  out.reserve(header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    out.push_back(read_entry(name, entry, body_size, body, 8 + n, path));
  }
  return out;
}

safetensors_file safetensors_file::open(const std::string& path) {
  safetensors_file f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail(path, "empty file (0 bytes), not a safetensors file");
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) fail(path, std::string("cannot mmap: ") + std::strerror(err));
  f.map_ = std::shared_ptr<const void>(m, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  f.tensors_ = parse_safetensors(static_cast<const uint8_t*>(m), size, path);
  return f;
}

} // namespace conveyor::model
