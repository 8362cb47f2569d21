// Internal to model/: JSON as Hugging Face folders hold it (config.json, tokenizer.json,
// tokenizer_config.json, safetensors headers), parsed with nlohmann::json under bounds (nesting
// depth, file size) so a hostile file fails with a one-line error instead of exhausting memory.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor::model {

/// Parses `text`; throws model_error("<where>: malformed JSON: ...") when it is not JSON or nests
/// deeper than 64 levels.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& where);

/// True when `path` is a regular file (symlinks followed); false when nothing is there or it is
/// something else. Throws model_error("<path>: cannot access: <why>") when it cannot be looked
/// at (a folder without search permission, a symlink loop): never std::filesystem_error.
bool hf_is_file(const std::filesystem::path& path);

/// Reads the whole file (at most 1 GiB). Throws model_error("<path>: ...").
std::string read_text_file(const std::string& path);
/// Reads and parses the file (at most 1 GiB). Throws model_error("<path>: ...").
nlohmann::json read_json_file(const std::string& path);

/// config.json fields. nullopt when the key is absent or null; model_error("<where>: ...") when it
/// has another type, or an integer outside [min, max].
std::optional<int64_t> json_int(const nlohmann::json& obj, const char* key, const std::string& where,
                                int64_t min = 1, int64_t max = int64_t{1} << 30);
std::optional<double> json_number(const nlohmann::json& obj, const char* key, const std::string& where);
std::optional<bool> json_bool(const nlohmann::json& obj, const char* key, const std::string& where);
std::optional<std::string> json_string(const nlohmann::json& obj, const char* key, const std::string& where);

} // namespace conveyor::model
