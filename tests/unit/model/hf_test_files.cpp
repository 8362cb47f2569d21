#include "hf_test_files.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/formats/safetensors.hpp"
#include "model_files.hpp"

namespace conveyor::model::testing {

namespace fs = std::filesystem;

std::string copy_arch_folder(const std::string& folder, const std::string& copy) {
  const fs::path dst = temp_path(copy);
  fs::remove_all(dst);
  fs::copy(fs::path(arch_models_dir()) / folder, dst, fs::copy_options::recursive);
  return dst.string();
}

std::vector<st_tensor> read_st(const std::string& path) {
  const auto f = safetensors_file::open(path);
  std::vector<st_tensor> out;
  for (const auto& t : f.tensors())
    out.push_back({t.name, t.dtype, t.shape, std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
  return out;
}

void write_st_raw(const std::string& path, const nlohmann::json& header, const std::string& data) {
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';
  const uint64_t n = h.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);
  write_bytes(path, bytes + h + data);
}

void write_st(const std::string& path, const std::vector<st_tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const st_tensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  write_st_raw(path, header, data);
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_bytes(path)); }

void write_json(const std::string& path, const nlohmann::json& j) { write_bytes(path, j.dump(1)); }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace conveyor::model::testing
