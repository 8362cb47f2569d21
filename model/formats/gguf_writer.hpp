// Writes GGUF v3 (or v2) files: metadata of every value type and tensors with raw bytes.
// Output is llama.cpp-compatible: tensors packed in add order, each zero-padded to the alignment,
// data section at the padded end of the tensor infos. Used by tests (tiny models) and tools.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "model/formats/gguf.hpp"

namespace conveyor::model {

/// Accumulates metadata and tensors in memory, then serializes them in one go.
/// Misuse (duplicate key or tensor, bad shape, byte count that does not match the shape)
/// throws std::invalid_argument naming the key or tensor.
class gguf_writer {
public:
  /// Any value, including nested arrays. Keys keep insertion order.
  void add_kv(std::string key, gguf_value value);
  /// A number or a bool: its GGUF type follows the C++ type (uint8_t .. int64_t, float, double, bool).
  template <class T>
    requires std::is_arithmetic_v<T>
  void add_kv(std::string key, T v) {
    add_kv(std::move(key), gguf_value{v});
  }
  void add_kv(std::string key, std::string_view v);
  void add_kv(std::string key, const char* v);
  /// Arrays of strings / integers / floats (element type follows the C++ type).
  void add_kv(std::string key, const std::vector<std::string>& v);
  void add_kv(std::string key, const std::vector<int32_t>& v);
  void add_kv(std::string key, const std::vector<uint32_t>& v);
  void add_kv(std::string key, const std::vector<int64_t>& v);
  void add_kv(std::string key, const std::vector<float>& v);
  void add_kv(std::string key, const std::vector<double>& v);

  /// Adds a tensor; `ne[0]` is the contiguous dimension (1 to 4 dims), `data` must be exactly
  /// the tensor's byte size for `type`. The bytes are copied.
  void add_tensor(std::string name, ggml_type type, std::span<const int64_t> ne, std::span<const uint8_t> data);
  /// Convenience for F32 tensors.
  void add_tensor_f32(std::string name, std::span<const int64_t> ne, std::span<const float> data);

  /// Alignment of the data section and of every tensor (nonzero power of two). When set, it is
  /// also written as `general.alignment` (u32); otherwise the GGUF default 32 is used silently.
  void set_alignment(uint32_t alignment);
  /// 3 (default) or 2; both share the same layout.
  void set_version(uint32_t version);

  /// The whole file as bytes.
  std::vector<uint8_t> serialize() const;
  /// Writes serialize() to `path`. Throws gguf_error("<path>: cannot write: ...") on I/O failure.
  void write(const std::string& path) const;

private:
  struct tensor {
    std::string name;
    ggml_type type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, gguf_value>> kvs_;
  std::vector<tensor> tensors_;
  uint32_t alignment_ = 32;
  bool alignment_explicit_ = false;
  uint32_t version_ = 3;
};

/// Byte size of a tensor of `type` with dims `ne` (ne[0] must be a multiple of the block size).
uint64_t tensor_nbytes(ggml_type type, std::span<const int64_t> ne);

} // namespace conveyor::model
