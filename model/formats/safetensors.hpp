// Reads safetensors files (Hugging Face's weight format: a u64 header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw data) through mmap. Every size
// in the header is checked against the file before use, so a corrupt file is a one-line
// model_error "<path>: <problem>" and never an out-of-range read, a misaligned typed read or a
// huge allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::model {

struct safetensors_tensor {
  std::string name;
  std::string dtype;            ///< as written: "F32", "F16", "BF16", "I8", "F8_E4M3", ...
  std::vector<int64_t> shape;   ///< row-major, outermost dimension first (PyTorch order)
  const uint8_t* data = nullptr;  ///< into the file's mapping
  uint64_t nbytes = 0;
};

/// Bytes per element of a safetensors dtype; 0 for a dtype this reader does not know.
uint32_t safetensors_dtype_size(std::string_view dtype);

/// Parses a whole safetensors image `data[0, size)`; the tensors point into it, sorted by name,
/// each aligned to its element size (a tensor that is not, as when the header length is not a
/// multiple of 8, is refused). Throws model_error("<path>: <problem>").
std::vector<safetensors_tensor> parse_safetensors(const uint8_t* data, uint64_t size, const std::string& path);

class safetensors_file {
public:
  /// Maps and parses `path`. Throws model_error.
  static safetensors_file open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<safetensors_tensor>& tensors() const { return tensors_; }
  /// Keeps the mapping (and so every tensor's data) alive after this object is gone.
  const std::shared_ptr<const void>& mapping() const { return map_; }

private:
  std::string path_;
  std::shared_ptr<const void> map_;
  std::vector<safetensors_tensor> tensors_;
};

} // namespace conveyor::model
