// Internal to the encoders: a msgpack packer that appends to a wire_bytes vector.
#pragma once

#include <cstring>
#include <string_view>
#include <type_traits>

#include <msgpack.hpp>

#include "schemas/protocol.hpp"

namespace conveyor::schemas::detail {

/// The buffer msgpack::packer writes to.
struct byte_sink {
  wire_bytes bytes;
  void write(const char* data, std::size_t size) {
    if (size == 0) return;
    std::size_t old = bytes.size();
    bytes.resize(old + size);
    std::memcpy(bytes.data() + old, data, size);
  }
};

/// packer plus a few helpers for string keys and values.
class map_packer {
public:
  map_packer() : pk_(sink_) {}
  msgpack::packer<byte_sink>& pk() { return pk_; }
  map_packer& map(uint32_t n) { pk_.pack_map(n); return *this; }
  map_packer& array(uint32_t n) { pk_.pack_array(n); return *this; }
  map_packer& str(std::string_view s) {
    pk_.pack_str(static_cast<uint32_t>(s.size()));
    pk_.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
    return *this;
  }
  /// Binary bytes (msgpack bin): a token's bytes, which need not be UTF-8.
  map_packer& bin(std::string_view b) {
    pk_.pack_bin(static_cast<uint32_t>(b.size()));
    pk_.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
    return *this;
  }
  template <class T> map_packer& kv(std::string_view key, const T& value) {
    str(key);
    if constexpr (std::is_convertible_v<const T&, std::string_view>) str(value);
    else if constexpr (std::is_floating_point_v<T>) f64(value);
    else pk_.pack(value);
    return *this;
  }
  /// A float64, always. NOTE: msgpack-c 4.1's pack_double() writes integral values (40.0, -0.0)
  /// as integers; the protocol promises floats, so doubles are written here by hand.
  map_packer& f64(double d) {
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    char buf[9];
    buf[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    sink_.write(buf, sizeof buf);
    return *this;
  }
  /// Appends one already-encoded msgpack object.
  map_packer& raw(const uint8_t* data, std::size_t size) {
    sink_.write(reinterpret_cast<const char*>(data), size);
    return *this;
  }
  wire_bytes take() { return std::move(sink_.bytes); }

private:
  byte_sink sink_;
  msgpack::packer<byte_sink> pk_;
};

} // namespace conveyor::schemas::detail
