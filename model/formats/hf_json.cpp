// Bounded JSON parsing and typed field access for Hugging Face folders (model/formats/hf_json.hpp).
#include "model/formats/hf_json.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "model/formats/llama_config.hpp"

namespace conveyor::model {
namespace {

constexpr int max_depth = 64;
constexpr uint64_t max_file_bytes = uint64_t{1} << 30;

struct too_deep {};

const char* type_of(const nlohmann::json& v) { return v.type_name(); }

} // namespace

nlohmann::json parse_json_bounded(std::string_view text, const std::string& where) {
  try {
    return nlohmann::json::parse(text.begin(), text.end(), [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > max_depth) throw too_deep{};
      return true;
    });
  } catch (const too_deep&) {
    throw model_error(where + ": malformed JSON: nested deeper than " + std::to_string(max_depth) + " levels");
  } catch (const nlohmann::json::exception& e) {
    throw model_error(where + ": malformed JSON: " + e.what());
  }
}

bool hf_is_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec && st.type() != std::filesystem::file_type::not_found)
    throw model_error(path.string() + ": cannot access: " + ec.message());
  return st.type() == std::filesystem::file_type::regular;
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!hf_is_file(path)) throw model_error(path + ": no such file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw model_error(path + ": cannot stat: " + ec.message());
  if (size > max_file_bytes) throw model_error(path + ": " + std::to_string(size) + " bytes is too large for a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw model_error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (!in && !in.eof()) throw model_error(path + ": cannot read");
  return buf.str();
}

nlohmann::json read_json_file(const std::string& path) { return parse_json_bounded(read_text_file(path), path); }

std::optional<int64_t> json_int(const nlohmann::json& obj, const char* key, const std::string& where, int64_t min,
                                int64_t max) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    throw model_error(where + ": '" + key + "' is a " + type_of(*it) + ", expected an integer");
  const bool huge = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max);
  const int64_t v = huge ? max : it->get<int64_t>();
  if (huge || v < min || v > max)
    throw model_error(where + ": '" + key + "' = " + it->dump() + " is out of range [" + std::to_string(min) + ", " +
                      std::to_string(max) + "]");
  return v;
}

std::optional<double> json_number(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw model_error(where + ": '" + key + "' is a " + type_of(*it) + ", expected a number");
  return it->get<double>();
}

std::optional<bool> json_bool(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) throw model_error(where + ": '" + key + "' is a " + type_of(*it) + ", expected true or false");
  return it->get<bool>();
}

std::optional<std::string> json_string(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw model_error(where + ": '" + key + "' is a " + type_of(*it) + ", expected a string");
  return it->get<std::string>();
}

} // namespace conveyor::model
