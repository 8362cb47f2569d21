// GGUF serialization: header, metadata, tensor infos, zero padding, packed tensor data.
// Layout is the one llama.cpp and gguf-py write: info[i].offset == sum of padded sizes before i.
#include "model/formats/gguf_writer.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <unordered_set>

namespace conveyor::model {
namespace {

class byte_sink {
public:
  explicit byte_sink(std::vector<uint8_t>& out) : out_(out) {}
  template <class T> void put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    out_.resize((out_.size() + alignment - 1) / alignment * alignment, 0);
  }
  void put_value(const gguf_value& v) {
    std::visit(
        [this](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(x);
          } else if constexpr (std::is_same_v<T, gguf_array>) {
            put<uint32_t>(static_cast<uint32_t>(x.elem_type));
            put<uint64_t>(x.items.size());
            for (const gguf_value& item : x.items) {
              if (item.type() != x.elem_type) {
                throw std::invalid_argument("gguf_writer: array element type does not match the array's elem_type");
              }
              put_value(item);
            }
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(x ? 1 : 0);
          } else {
            put<T>(x);
          }
        },
        v.v);
  }

private:
  std::vector<uint8_t>& out_;
};

uint64_t padded(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

template <class T> gguf_value make_array(gguf_value_type elem, const std::vector<T>& v) {
  gguf_array arr;
  arr.elem_type = elem;
  arr.items.reserve(v.size());
  for (const T& x : v) {
    arr.items.push_back(gguf_value{x});
  }
  return gguf_value{std::move(arr)};
}

} // namespace

uint64_t tensor_nbytes(ggml_type type, std::span<const int64_t> ne) {
  const size_t blck = block_elems(type);
  if (blck == 0) {
    throw std::invalid_argument("unknown ggml type " + type_name(type));
  }
  if (ne.empty() || ne.size() > 4) {
    throw std::invalid_argument("a tensor needs 1 to 4 dimensions, got " + std::to_string(ne.size()));
  }
  if (ne[0] < 0 || ne[0] % static_cast<int64_t>(blck) != 0) {
    throw std::invalid_argument("ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the " +
                                type_name(type) + " block size " + std::to_string(blck));
  }
  uint64_t n = static_cast<uint64_t>(ne[0]) / blck * block_bytes(type);
  for (size_t d = 1; d < ne.size(); ++d) {
    if (ne[d] < 0) {
      throw std::invalid_argument("negative dimension ne[" + std::to_string(d) + "]");
    }
    n *= static_cast<uint64_t>(ne[d]);
  }
  return n;
}

void gguf_writer::add_kv(std::string key, gguf_value value) {
  for (const auto& kv : kvs_) {
    if (kv.first == key) {
      throw std::invalid_argument("gguf_writer: duplicate metadata key '" + key + "'");
    }
  }
  if (key == "general.alignment" && alignment_explicit_) {
    throw std::invalid_argument("gguf_writer: general.alignment was already set by set_alignment()");
  }
  // A valid general.alignment given as a plain key also sets the layout; invalid ones (tests
  // writing broken files) are written as given and the default layout is kept.
  if (key == "general.alignment" && value.type() == gguf_value_type::u32 &&
      std::has_single_bit(std::get<uint32_t>(value.v))) {
    alignment_ = std::get<uint32_t>(value.v);
  }
  kvs_.emplace_back(std::move(key), std::move(value));
}

void gguf_writer::add_kv(std::string key, std::string_view v) {
  add_kv(std::move(key), gguf_value{std::string(v)});
}
void gguf_writer::add_kv(std::string key, const char* v) { add_kv(std::move(key), std::string_view(v)); }
void gguf_writer::add_kv(std::string key, const std::vector<std::string>& v) {
  add_kv(std::move(key), make_array(gguf_value_type::string, v));
}
void gguf_writer::add_kv(std::string key, const std::vector<int32_t>& v) {
  add_kv(std::move(key), make_array(gguf_value_type::i32, v));
}
void gguf_writer::add_kv(std::string key, const std::vector<uint32_t>& v) {
  add_kv(std::move(key), make_array(gguf_value_type::u32, v));
}
void gguf_writer::add_kv(std::string key, const std::vector<int64_t>& v) {
  add_kv(std::move(key), make_array(gguf_value_type::i64, v));
}
void gguf_writer::add_kv(std::string key, const std::vector<float>& v) {
  add_kv(std::move(key), make_array(gguf_value_type::f32, v));
}
void gguf_writer::add_kv(std::string key, const std::vector<double>& v) {
  add_kv(std::move(key), make_array(gguf_value_type::f64, v));
}

void gguf_writer::add_tensor(std::string name, ggml_type type, std::span<const int64_t> ne,
                             std::span<const uint8_t> data) {
  for (const tensor& t : tensors_) {
    if (t.name == name) {
      throw std::invalid_argument("gguf_writer: duplicate tensor '" + name + "'");
    }
  }
  uint64_t nbytes = 0;
  try {
    nbytes = tensor_nbytes(type, ne);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("gguf_writer: tensor '" + name + "': " + e.what());
  }
  if (nbytes != data.size()) {
    throw std::invalid_argument("gguf_writer: tensor '" + name + "' needs " + std::to_string(nbytes) +
                                " bytes of " + type_name(type) + " data, got " + std::to_string(data.size()));
  }
  tensors_.push_back({std::move(name), type, {ne.begin(), ne.end()}, {data.begin(), data.end()}});
}

void gguf_writer::add_tensor_f32(std::string name, std::span<const int64_t> ne, std::span<const float> data) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  add_tensor(std::move(name), ggml_type::f32, ne, std::span<const uint8_t>(bytes, data.size_bytes()));
}

void gguf_writer::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment)) {
    throw std::invalid_argument("gguf_writer: alignment " + std::to_string(alignment) +
                                " is not a nonzero power of two");
  }
  for (const auto& kv : kvs_) {
    if (kv.first == "general.alignment") {
      throw std::invalid_argument("gguf_writer: general.alignment was already added as a key");
    }
  }
  alignment_ = alignment;
  alignment_explicit_ = true;
}

void gguf_writer::set_version(uint32_t version) {
  if (version != 2 && version != 3) {
    throw std::invalid_argument("gguf_writer: can only write GGUF versions 2 and 3");
  }
  version_ = version;
}

std::vector<uint8_t> gguf_writer::serialize() const {
  std::vector<uint8_t> out;
  byte_sink sink(out);
  const bool write_alignment = alignment_explicit_;
  sink.put<uint32_t>(0x46554747u);  // "GGUF"
  sink.put<uint32_t>(version_);
  sink.put<uint64_t>(tensors_.size());
  sink.put<uint64_t>(kvs_.size() + (write_alignment ? 1 : 0));
  if (write_alignment) {
    sink.put_string("general.alignment");
    sink.put<uint32_t>(static_cast<uint32_t>(gguf_value_type::u32));
    sink.put<uint32_t>(alignment_);
  }
  for (const auto& [key, value] : kvs_) {
    sink.put_string(key);
    sink.put<uint32_t>(static_cast<uint32_t>(value.type()));
    sink.put_value(value);
  }
  uint64_t offset = 0;
  for (const tensor& t : tensors_) {
    sink.put_string(t.name);
    sink.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) {
      sink.put<uint64_t>(static_cast<uint64_t>(n));
    }
    sink.put<uint32_t>(static_cast<uint32_t>(t.type));
    sink.put<uint64_t>(offset);
    offset += padded(t.data.size(), alignment_);
  }
  if (!tensors_.empty()) {
    sink.pad_to(alignment_);
  }
  for (const tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    sink.pad_to(alignment_);
  }
  return out;
}

void gguf_writer::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = serialize();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    throw gguf_error(path + ": cannot write: " + std::strerror(errno));
  }
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int err = errno;
  if (std::fclose(f) != 0 || n != bytes.size()) {
    throw gguf_error(path + ": cannot write: " + std::strerror(err));
  }
}

} // namespace conveyor::model
