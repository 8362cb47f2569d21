// Test support for Hugging Face folders: copies of the tiny folders scripts/make_arch_models.py
// writes (build/arch_models), edited JSON files, and safetensors files written from the test.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::model::testing {

struct st_tensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

/// A fresh copy of build/arch_models/<folder> in this process's temp dir, named `copy`.
std::string copy_arch_folder(const std::string& folder, const std::string& copy);
/// The tensors of a safetensors file, bytes copied out (header order is by name).
std::vector<st_tensor> read_st(const std::string& path);
/// Writes a well-formed safetensors file (header padded to 8 bytes, data packed in order).
void write_st(const std::string& path, const std::vector<st_tensor>& tensors);
/// Writes `header` (as is) with its length, then `data`: for malformed files.
void write_st_raw(const std::string& path, const nlohmann::json& header, const std::string& data);
nlohmann::json read_json(const std::string& path);
void write_json(const std::string& path, const nlohmann::json& j);
void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);

} // namespace conveyor::model::testing
