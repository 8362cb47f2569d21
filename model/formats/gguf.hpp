// Reads a GGUF file (v2, v3) through mmap: metadata of every type, tensor infos, aligned data.
// Everything is validated against the file length before use; any problem is a gguf_error
// whose message is one line "<path>: <problem>", and nothing is allocated from an unchecked size.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "model/formats/ggml_type.hpp"

namespace conveyor::model {

/// A bad, truncated or unsupported model file. what() is "<path>: <problem>".
struct gguf_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// GGUF metadata value types (model-format.md §1.3).
enum class gguf_value_type : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

struct gguf_value;
/// An array value: element type plus elements (nested arrays allowed by the spec).
struct gguf_array {
  gguf_value_type elem_type = gguf_value_type::u8;
  std::vector<gguf_value> items;
};
struct gguf_value {
  std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
               gguf_array, uint64_t, int64_t, double>
      v;
  gguf_value_type type() const;
};

struct gguf_tensor_info {
  std::string name;
  ggml_type type = ggml_type::f32;
  uint32_t n_dims = 0;
  /// ne[0] is the contiguous dimension; unused dims are 1.
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  /// Offset of the data, relative to the start of the file's data section.
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  int64_t num_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

/// One tensor of an assembled view: name, type, n_dims and ne (offset and nbytes are filled in
/// by assemble), and its bytes, which one of the view's owners keeps alive.
struct gguf_tensor_view {
  gguf_tensor_info info;
  const uint8_t* data = nullptr;
};

class gguf_file {
public:
  /// Maps and validates `path`. Throws gguf_error.
  static gguf_file open(const std::string& path);
  /// A GGUF built in memory rather than read (a Hugging Face folder, model/formats/hf_folder.hpp): the
  /// metadata `kvs` in order, and tensors pointing into memory that `owners` keep alive
  /// (mappings, buffers) for as long as the gguf_file lives. Checks what open() checks of names,
  /// keys and shapes; version() is 3 and alignment() 32. Throws gguf_error("<path>: <problem>").
  static gguf_file assemble(const std::string& path, std::vector<std::pair<std::string, gguf_value>> kvs,
                            std::vector<gguf_tensor_view> tensors, std::vector<std::shared_ptr<const void>> owners);
  gguf_file(gguf_file&&) noexcept;
  gguf_file& operator=(gguf_file&&) noexcept;
  ~gguf_file();

  const std::string& path() const;
  uint32_t version() const;
  uint32_t alignment() const;

  const gguf_value* find(std::string_view key) const;
  /// Typed getters: nullopt when the key is absent; gguf_error when present with another type.
  /// get_int accepts every integer type; get_float accepts f32 and f64.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  /// Empty when absent; gguf_error when present and not an array of that kind.
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  /// All keys in file order.
  std::vector<std::string> keys() const;

  const std::vector<gguf_tensor_info>& tensors() const;
  /// nullptr when absent.
  const gguf_tensor_info* find_tensor(std::string_view name) const;
  /// Pointer into the mapping; valid while this object lives.
  const uint8_t* tensor_data(const gguf_tensor_info& t) const;
  /// Hints that [p, p + n) will not be read for a while: the whole pages of it inside open()'s
  /// mapping leave resident memory (madvise MADV_DONTNEED; a later read faults them back in
  /// from the file). Does nothing for other memory (an assembled file's buffers).
  void release_pages(const uint8_t* p, size_t n) const;

private:
  struct impl;
  explicit gguf_file(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

} // namespace conveyor::model
