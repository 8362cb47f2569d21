// Internal to decode.cpp: typed reads of one msgpack map's fields. Every failure throws
// `refusal` naming the field; decode_request() catches it and returns a decode_error, so no
// exception leaves the schemas library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "schemas/protocol.hpp"

namespace conveyor::schemas::detail {

/// Thrown inside the decoder only.
struct refusal {
  error_code code;
  std::string field;
  std::string message;
};

[[noreturn]] void refuse(std::string_view field, std::string message,
                         error_code code = error_code::bad_request);

/// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view s);

/// A msgpack map whose keys are distinct strings. `where` prefixes field names in errors
/// ("messages[2]." for a nested map, "" for the top level).
class field_map {
public:
  /// Refuses a non-map, a non-string key or a repeated key.
  field_map(const msgpack::object& obj, std::string where);

  /// The value under `key`, or nullptr when the key is absent or its value is nil.
  const msgpack::object* find(std::string_view key) const;
  /// The full field name for errors: where + key.
  std::string name(std::string_view key) const { return where_ + std::string(key); }

  /// Typed reads; absent (or nil) keys leave `out` unchanged and return false.
  bool read(std::string_view key, std::string& out) const;
  bool read(std::string_view key, bool& out) const;
  bool read_int(std::string_view key, int64_t& out, int64_t lo, int64_t hi) const;
  bool read_uint(std::string_view key, uint64_t& out) const;
  bool read_number(std::string_view key, double& out) const;
  bool read_strings(std::string_view key, std::vector<std::string>& out, std::size_t max_count,
                    std::size_t max_bytes) const;
  bool read_ints(std::string_view key, std::vector<int32_t>& out, std::size_t max_count,
                 int64_t lo, int64_t hi) const;

private:
  /// The array under `key` (nullptr when absent), refused when it is not an array of at most
  /// max_count entries; `what` names the wanted type in the error ("an array of strings").
  const msgpack::object_array* find_array(std::string_view key, const char* what, std::size_t max_count) const;

  const msgpack::object_map* map_;
  std::string where_;
};

} // namespace conveyor::schemas::detail
