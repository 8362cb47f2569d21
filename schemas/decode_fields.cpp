#include "schemas/decode_fields.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::schemas::detail {

namespace {

const char* type_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "binary data";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    case msgpack::type::EXT: return "an ext value";
  }
  return "an unknown type";
}

[[noreturn]] void wrong_type(const std::string& field, const char* want, const msgpack::object& o) {
  refuse(field, field + " must be " + want + ", got " + type_name(o));
}

std::string_view str_of(const msgpack::object& o) { return {o.via.str.ptr, o.via.str.size}; }

// Reads an integer in [lo, hi]; refuses floats, other types and out-of-range values.
int64_t int_in(const msgpack::object& o, const std::string& field, int64_t lo, int64_t hi) {
  auto out_of_range = [&] {
    refuse(field, field + " must be an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  };
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        static_cast<int64_t>(o.via.u64) > hi || static_cast<int64_t>(o.via.u64) < lo)
      out_of_range();
    return static_cast<int64_t>(o.via.u64);
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    if (o.via.i64 < lo || o.via.i64 > hi) out_of_range();
    return o.via.i64;
  }
  wrong_type(field, "an integer", o);
}

} // namespace

void refuse(std::string_view field, std::string message, error_code code) {
  throw refusal{code, std::string(field), std::move(message)};
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    unsigned c = *p;
    if (c < 0x80) { ++p; continue; }
    int n = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; min = 0x10000; }
    else return false;
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

field_map::field_map(const msgpack::object& obj, std::string where) : where_(std::move(where)) {
  // The map's own name for errors: "" at the top level, "messages[2]" for a nested map.
  const std::string self = where_.empty() ? "" : where_.substr(0, where_.size() - 1);
  if (obj.type != msgpack::type::MAP)
    refuse(self, (where_.empty() ? std::string("the message") : self) + " must be a map, got " +
                     type_name(obj));
  map_ = &obj.via.map;
  std::vector<std::string_view> keys;
  keys.reserve(map_->size);
  for (uint32_t i = 0; i < map_->size; ++i) {
    const msgpack::object& key = map_->ptr[i].key;
    if (key.type != msgpack::type::STR)
      refuse(self, "map keys must be strings, got " + std::string(type_name(key)));
    // Checked before a key is ever echoed (the repeated-key error names it): a reply with invalid
    // UTF-8 cannot be read by clients that decode strings (Python's msgpack, raw=False).
    if (!valid_utf8(str_of(key))) refuse(self, "map keys must be valid UTF-8");
    keys.push_back(str_of(key));
  }
  // Sorted, not compared pairwise: a frame full of wide maps costs n log n, not n squared.
  std::sort(keys.begin(), keys.end());
  if (const auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end())
    refuse(name(*twice), "key " + name(*twice) + " appears twice");
}

const msgpack::object* field_map::find(std::string_view key) const {
  for (uint32_t i = 0; i < map_->size; ++i)
    if (str_of(map_->ptr[i].key) == key)
      return map_->ptr[i].val.type == msgpack::type::NIL ? nullptr : &map_->ptr[i].val;
  return nullptr;
}

bool field_map::read(std::string_view key, std::string& out) const {
  const msgpack::object* o = find(key);
  if (!o) return false;
  if (o->type != msgpack::type::STR) wrong_type(name(key), "a string", *o);
  if (!valid_utf8(str_of(*o))) refuse(name(key), name(key) + " must be valid UTF-8");
  out.assign(str_of(*o));
  return true;
}

bool field_map::read(std::string_view key, bool& out) const {
  const msgpack::object* o = find(key);
  if (!o) return false;
  if (o->type != msgpack::type::BOOLEAN) wrong_type(name(key), "a boolean", *o);
  out = o->via.boolean;
  return true;
}

bool field_map::read_int(std::string_view key, int64_t& out, int64_t lo, int64_t hi) const {
  const msgpack::object* o = find(key);
  if (!o) return false;
  out = int_in(*o, name(key), lo, hi);
  return true;
}

bool field_map::read_uint(std::string_view key, uint64_t& out) const {
  const msgpack::object* o = find(key);
  if (!o) return false;
  if (o->type == msgpack::type::NEGATIVE_INTEGER)
    refuse(name(key), name(key) + " must be an integer in [0, 2^64 - 1]");
  if (o->type != msgpack::type::POSITIVE_INTEGER) wrong_type(name(key), "an integer", *o);
  out = o->via.u64;
  return true;
}

bool field_map::read_number(std::string_view key, double& out) const {
  const msgpack::object* o = find(key);
  if (!o) return false;
  switch (o->type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: out = o->via.f64; return true;
    case msgpack::type::POSITIVE_INTEGER: out = static_cast<double>(o->via.u64); return true;
    case msgpack::type::NEGATIVE_INTEGER: out = static_cast<double>(o->via.i64); return true;
    default: wrong_type(name(key), "a number", *o);
  }
}

const msgpack::object_array* field_map::find_array(std::string_view key, const char* what,
                                                   std::size_t max_count) const {
  const msgpack::object* o = find(key);
  if (!o) return nullptr;
  if (o->type != msgpack::type::ARRAY) wrong_type(name(key), what, *o);
  if (o->via.array.size > max_count)
    refuse(name(key), name(key) + " has " + std::to_string(o->via.array.size) +
                          " entries; at most " + std::to_string(max_count) + " are allowed");
  return &o->via.array;
}

bool field_map::read_strings(std::string_view key, std::vector<std::string>& out,
                             std::size_t max_count, std::size_t max_bytes) const {
  const msgpack::object_array* a = find_array(key, "an array of strings", max_count);
  if (!a) return false;
  out.clear();
  for (uint32_t i = 0; i < a->size; ++i) {
    const msgpack::object& e = a->ptr[i];
    std::string field = name(key) + "[" + std::to_string(i) + "]";
    if (e.type != msgpack::type::STR) wrong_type(field, "a string", e);
    if (e.via.str.size == 0 || e.via.str.size > max_bytes)
      refuse(field, field + " must be 1.." + std::to_string(max_bytes) + " bytes long");
    if (!valid_utf8(str_of(e))) refuse(field, field + " must be valid UTF-8");
    out.emplace_back(str_of(e));
  }
  return true;
}

bool field_map::read_ints(std::string_view key, std::vector<int32_t>& out, std::size_t max_count,
                          int64_t lo, int64_t hi) const {
  const msgpack::object_array* a = find_array(key, "an array of integers", max_count);
  if (!a) return false;
  out.clear();
  out.reserve(a->size);
  for (uint32_t i = 0; i < a->size; ++i)
    out.push_back(static_cast<int32_t>(int_in(a->ptr[i], name(key) + "[" + std::to_string(i) + "]", lo, hi)));
  return true;
}

} // namespace conveyor::schemas::detail
