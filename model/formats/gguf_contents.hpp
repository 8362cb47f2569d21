// Internal to the GGUF reader: the parsed, validated contents of a GGUF file (no mapping), and
// the parser that produces them from raw bytes. gguf_file owns one of these next to its mmap.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/formats/gguf.hpp"

namespace conveyor::model {

/// Transparent hash so maps keyed by std::string can be searched with a string_view.
struct gguf_string_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using gguf_name_index = std::unordered_map<std::string, size_t, gguf_string_hash, std::equal_to<>>;

/// Everything parse_gguf() learned from the file; offsets are checked against the file length.
struct gguf_contents {
  uint32_t version = 0;
  uint32_t alignment = 32;
  /// Absolute file offset of the data section (padded end of the tensor infos).
  uint64_t data_offset = 0;
  std::vector<std::pair<std::string, gguf_value>> kvs;  // file order
  gguf_name_index kv_index;                              // key -> index into kvs
  std::vector<gguf_tensor_info> tensors;                 // file order
  gguf_name_index tensor_index;                          // name -> index into tensors
};

/// What a gguf_file holds: either a read-only mapping of a GGUF file (open) or tensors that
/// point into memory kept alive by `owners` (assemble).
struct gguf_file::impl {
  std::string path;
  void* map = nullptr;
  size_t map_size = 0;
  gguf_contents c;
  /// assemble() only: each tensor's bytes, in the order of c.tensors, and their keepers.
  bool assembled = false;
  std::vector<const uint8_t*> tensor_ptrs;
  std::vector<std::shared_ptr<const void>> owners;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl();
  [[noreturn]] void fail(const std::string& problem) const { throw gguf_error(path + ": " + problem); }
};

/// Parses and validates `data[0, size)`. Throws gguf_error("<path>: <problem>").
gguf_contents parse_gguf(const uint8_t* data, uint64_t size, const std::string& path);

/// "u8", "string", "array", ... ("type<N>" for an unknown id).
std::string value_type_name(gguf_value_type t);

} // namespace conveyor::model
