// Invariant checks shared by the fuzz targets: an abort that libFuzzer reports as a crash, a
// UTF-8 validator written independently of the decoder's (Unicode 15, table 3-7, by byte ranges),
// and a reader for encoded replies and events that checks they are what a client can decode.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "schemas/protocol.hpp"

/// Aborts with a message when `cond` is false; libFuzzer then saves the input as a crash.
#define FUZZ_CHECK(cond, what)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "fuzz invariant violated: %s\n  check: %s\n  at %s:%d\n",        \
                   std::string(what).c_str(), #cond, __FILE__, __LINE__);                   \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

namespace conveyor::fuzz {

/// True when `s` is well-formed UTF-8: each sequence matches one row of the Unicode standard's
/// table 3-7 (so no overlongs, no surrogates, nothing past U+10FFFF).
inline bool well_formed_utf8(std::string_view s) {
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  std::size_t i = 0;
  while (i < s.size()) {
    unsigned c = at(i);
    if (c <= 0x7F) { ++i; continue; }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return false;
    if (s.size() - i < len) return false;
    if (at(i + 1) < lo || at(i + 1) > hi) return false;
    for (std::size_t k = 2; k < len; ++k)
      if (at(i + k) < 0x80 || at(i + k) > 0xBF) return false;
    i += len;
  }
  return true;
}

inline std::string_view str_of(const msgpack::object& o) { return {o.via.str.ptr, o.via.str.size}; }

/// The first problem in one decoded value of an outgoing message, or nullptr: only the types the
/// protocol uses, string keys, and well-formed UTF-8 in every string (Python's msgpack, with
/// raw=False, fails on anything else, so a producer could not even read its error reply).
inline const char* first_problem(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
    case msgpack::type::BOOLEAN:
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return nullptr;
    case msgpack::type::STR:
      return well_formed_utf8(str_of(o)) ? nullptr : "a string is not well-formed UTF-8";
    case msgpack::type::ARRAY:
      for (uint32_t i = 0; i < o.via.array.size; ++i)
        if (const char* p = first_problem(o.via.array.ptr[i])) return p;
      return nullptr;
    case msgpack::type::MAP:
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object& key = o.via.map.ptr[i].key;
        if (key.type != msgpack::type::STR) return "a map key is not a string";
        if (const char* p = first_problem(key)) return p;
        if (const char* p = first_problem(o.via.map.ptr[i].val)) return p;
      }
      return nullptr;
    default: return "a value has a type the protocol never sends (bin or ext)";
  }
}

/// An encoded reply or event, unpacked and checked: one complete msgpack map, nothing after it.
class outgoing {
public:
  explicit outgoing(const schemas::wire_bytes& bytes) {
    std::size_t off = 0;
    try {
      handle_ = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size(), off);
    } catch (const std::exception& e) {
      FUZZ_CHECK(false, std::string("an encoded message does not unpack: ") + e.what());
    }
    FUZZ_CHECK(off == bytes.size(), "an encoded message has trailing bytes");
    FUZZ_CHECK(handle_.get().type == msgpack::type::MAP, "an encoded message is not a map");
    const char* problem = first_problem(handle_.get());
    FUZZ_CHECK(!problem, std::string("an encoded message is unreadable for clients: ") + problem);
  }

  /// The value under `key` at the top level, or nullptr.
  const msgpack::object* get(std::string_view key) const { return find(handle_.get(), key); }

  static const msgpack::object* find(const msgpack::object& map, std::string_view key) {
    for (uint32_t i = 0; i < map.via.map.size; ++i)
      if (str_of(map.via.map.ptr[i].key) == key) return &map.via.map.ptr[i].val;
    return nullptr;
  }

  /// Checks a top-level string field: present with `want`, or absent when `want` is empty.
  void expect_str(std::string_view key, const std::string& want) const {
    const msgpack::object* v = get(key);
    if (want.empty()) {
      FUZZ_CHECK(!v, "key " + std::string(key) + " should be absent");
      return;
    }
    FUZZ_CHECK(v && v->type == msgpack::type::STR && str_of(*v) == want,
               "key " + std::string(key) + " should be \"" + want + "\"");
  }

  /// Checks "ok" is the boolean `want`.
  void expect_ok(bool want) const {
    const msgpack::object* v = get("ok");
    FUZZ_CHECK(v && v->type == msgpack::type::BOOLEAN && v->via.boolean == want,
               std::string("\"ok\" should be ") + (want ? "true" : "false"));
  }

private:
  msgpack::object_handle handle_;
};

} // namespace conveyor::fuzz
