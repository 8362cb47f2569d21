// GGUF v2/v3 parser: header, metadata (nested arrays included), tensor infos, data section.
// Every count and length is bounded by the bytes left in the file before anything is reserved,
// so corrupt input fails fast with a one-line gguf_error and never causes a huge allocation.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>

#include "model/formats/gguf_contents.hpp"
#include "model/formats/gguf_cursor.hpp"

namespace conveyor::model {
namespace {

constexpr uint64_t max_string_len = uint64_t{1} << 30;  // llama.cpp GGUF_MAX_STRING_LENGTH
constexpr uint64_t max_key_len = 65535;                 // gguf.md
constexpr uint64_t max_tensor_name_len = 63;            // llama.cpp GGML_MAX_NAME - 1
constexpr uint64_t max_array_count = uint64_t{1} << 30;
constexpr int max_array_depth = 8;
// NOTE: counts are bounded by the bytes left, but one byte can become a 40-byte gguf_value, so
// up-front reservations are capped too; beyond the cap memory grows only with parsed content.
constexpr uint64_t max_reserve = 1 << 16;
constexpr uint64_t min_kv_bytes = 8 + 4 + 1;             // key length, value type, smallest value
constexpr uint64_t min_tensor_info_bytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

/// Smallest encoding of one value of type `t` (0 for an unknown type).
uint64_t min_value_bytes(uint32_t t) {
  switch (static_cast<gguf_value_type>(t)) {
  case gguf_value_type::u8: case gguf_value_type::i8: case gguf_value_type::boolean: return 1;
  case gguf_value_type::u16: case gguf_value_type::i16: return 2;
  case gguf_value_type::u32: case gguf_value_type::i32: case gguf_value_type::f32: return 4;
  case gguf_value_type::u64: case gguf_value_type::i64: case gguf_value_type::f64: return 8;
  case gguf_value_type::string: return 8;
  case gguf_value_type::array: return 4 + 8;
  }
  return 0;
}

std::string quoted(std::string_view s) {
  std::string r(1, '\'');
  r.append(s);
  r.push_back('\'');
  return r;
}

gguf_value read_value(gguf_cursor& cur, uint32_t type, const std::string& ctx, int depth);

gguf_array read_array(gguf_cursor& cur, const std::string& ctx, int depth) {
  const auto elem = cur.read<uint32_t>(ctx + " array element type");
  const uint64_t min_bytes = min_value_bytes(elem);
  if (min_bytes == 0) {
    cur.fail(ctx + " is an array of unknown value type " + std::to_string(elem));
  }
  if (static_cast<gguf_value_type>(elem) == gguf_value_type::array && depth + 1 >= max_array_depth) {
    cur.fail(ctx + " has arrays nested deeper than " + std::to_string(max_array_depth) + " levels");
  }
  const auto count = cur.read<uint64_t>(ctx + " array count");
  if (count > max_array_count || count > cur.remaining() / min_bytes) {
    cur.fail(ctx + " declares " + std::to_string(count) + " array elements of type " +
             value_type_name(static_cast<gguf_value_type>(elem)) + " but only " +
             std::to_string(cur.remaining()) + " bytes remain at byte " + std::to_string(cur.pos()));
  }
  gguf_array arr;
  arr.elem_type = static_cast<gguf_value_type>(elem);
  arr.items.reserve(std::min(count, max_reserve));
  const std::string elem_ctx = ctx + " array element";
  for (uint64_t i = 0; i < count; ++i) {
    arr.items.push_back(read_value(cur, elem, elem_ctx, depth + 1));
  }
  return arr;
}

gguf_value read_value(gguf_cursor& cur, uint32_t type, const std::string& ctx, int depth) {
  gguf_value v;
  switch (static_cast<gguf_value_type>(type)) {
  case gguf_value_type::u8: v.v = cur.read<uint8_t>(ctx); break;
  case gguf_value_type::i8: v.v = cur.read<int8_t>(ctx); break;
  case gguf_value_type::u16: v.v = cur.read<uint16_t>(ctx); break;
  case gguf_value_type::i16: v.v = cur.read<int16_t>(ctx); break;
  case gguf_value_type::u32: v.v = cur.read<uint32_t>(ctx); break;
  case gguf_value_type::i32: v.v = cur.read<int32_t>(ctx); break;
  case gguf_value_type::f32: v.v = cur.read<float>(ctx); break;
  case gguf_value_type::boolean: v.v = cur.read<uint8_t>(ctx) != 0; break;  // llama.cpp: != 0
  case gguf_value_type::string: v.v = cur.read_string(ctx, max_string_len); break;
  case gguf_value_type::array: v.v = read_array(cur, ctx, depth); break;
  case gguf_value_type::u64: v.v = cur.read<uint64_t>(ctx); break;
  case gguf_value_type::i64: v.v = cur.read<int64_t>(ctx); break;
  case gguf_value_type::f64: v.v = cur.read<double>(ctx); break;
  default: cur.fail(ctx + " has unknown value type " + std::to_string(type));
  }
  return v;
}

void read_header(gguf_cursor& cur, gguf_contents& c) {
  if (cur.size() < 4) {
    cur.fail(cur.size() == 0 ? "empty file (0 bytes), not a GGUF file"
                             : "not a GGUF file (only " + std::to_string(cur.size()) + " bytes)");
  }
  const auto magic = cur.read<uint32_t>("magic");
  if (magic != 0x46554747u) {  // "GGUF" read as little-endian u32
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", __builtin_bswap32(magic));  // bytes in file order
    cur.fail(std::string("not a GGUF file (magic is ") + buf + ", expected 'GGUF')");
  }
  c.version = cur.read<uint32_t>("header version");
  if (c.version != 0 && (c.version & 0xFFFFu) == 0) {
    cur.fail("GGUF version field is " + std::to_string(c.version) +
             ": the file looks byte-swapped (big-endian), which is not supported");
  }
  if (c.version == 1) {
    cur.fail("GGUF version 1 is no longer supported (re-convert the model; versions 2 and 3 are read)");
  }
  if (c.version != 2 && c.version != 3) {
    cur.fail("unsupported GGUF version " + std::to_string(c.version) + " (versions 2 and 3 are read)");
  }
}

void read_metadata(gguf_cursor& cur, gguf_contents& c, uint64_t n_kv) {
  c.kvs.reserve(std::min(n_kv, max_reserve));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = cur.read_string("key of metadata entry " + std::to_string(i), max_key_len);
    if (c.kv_index.contains(key)) {
      cur.fail("duplicate metadata key " + quoted(key));
    }
    const std::string ctx = "metadata " + quoted(key);
    const auto type = cur.read<uint32_t>(ctx + " value type");
    gguf_value v = read_value(cur, type, ctx, 0);
    c.kv_index.emplace(key, c.kvs.size());
    c.kvs.emplace_back(std::move(key), std::move(v));
  }
  if (auto it = c.kv_index.find(std::string_view("general.alignment")); it != c.kv_index.end()) {
    const gguf_value& v = c.kvs[it->second].second;
    if (v.type() != gguf_value_type::u32) {
      cur.fail("general.alignment has type " + value_type_name(v.type()) + ", expected u32");
    }
    const uint32_t a = std::get<uint32_t>(v.v);
    if (!std::has_single_bit(a)) {
      cur.fail("general.alignment is " + std::to_string(a) + ", expected a nonzero power of two");
    }
    c.alignment = a;
  }
}

gguf_tensor_info read_tensor_info(gguf_cursor& cur, uint64_t index) {
  gguf_tensor_info t;
  t.name = cur.read_string("name of tensor " + std::to_string(index), max_tensor_name_len);
  const std::string ctx = "tensor " + quoted(t.name);
  t.n_dims = cur.read<uint32_t>(ctx + " n_dims");
  if (t.n_dims > 4) {
    cur.fail(ctx + " has " + std::to_string(t.n_dims) + " dimensions (at most 4 are allowed)");
  }
  int64_t n_elems = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    const auto ne = cur.read<uint64_t>(ctx + " ne[" + std::to_string(d) + "]");
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      cur.fail(ctx + " has negative dimension ne[" + std::to_string(d) + "] = " +
               std::to_string(static_cast<int64_t>(ne)));
    }
    t.ne[d] = static_cast<int64_t>(ne);
    if (__builtin_mul_overflow(n_elems, t.ne[d], &n_elems)) {
      cur.fail(ctx + " has too many elements (the product of its dimensions overflows int64)");
    }
  }
  const auto type_id = cur.read<uint32_t>(ctx + " type");
  t.type = static_cast<ggml_type>(type_id);
  const size_t blck = block_elems(t.type);
  if (blck == 0) {
    cur.fail(ctx + " has unknown ggml type id " + std::to_string(type_id));
  }
  if (t.ne[0] % static_cast<int64_t>(blck) != 0) {
    cur.fail(ctx + " has ne[0] = " + std::to_string(t.ne[0]) + ", not a multiple of the " + type_name(t.type) +
             " block size " + std::to_string(blck));
  }
  uint64_t nbytes = static_cast<uint64_t>(t.ne[0]) / blck;
  bool overflow = __builtin_mul_overflow(nbytes, block_bytes(t.type), &nbytes);
  for (int d = 1; d < 4; ++d) {
    overflow = overflow || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(t.ne[d]), &nbytes);
  }
  if (overflow) {
    cur.fail(ctx + " byte size overflows 64 bits");
  }
  t.nbytes = nbytes;
  t.offset = cur.read<uint64_t>(ctx + " offset");
  return t;
}

void read_tensor_infos(gguf_cursor& cur, gguf_contents& c, uint64_t n_tensors) {
  c.tensors.reserve(std::min(n_tensors, max_reserve));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    gguf_tensor_info t = read_tensor_info(cur, i);
    if (c.tensor_index.contains(t.name)) {
      cur.fail("duplicate tensor name " + quoted(t.name));
    }
    c.tensor_index.emplace(t.name, c.tensors.size());
    c.tensors.push_back(std::move(t));
  }
  c.data_offset = cur.aligned_pos(c.alignment);
  for (const gguf_tensor_info& t : c.tensors) {
    if (t.offset % c.alignment != 0) {
      cur.fail("tensor " + quoted(t.name) + " has offset " + std::to_string(t.offset) +
               ", not a multiple of the alignment " + std::to_string(c.alignment));
    }
    // data_offset <= size + alignment, so these sums cannot wrap before the comparison matters.
    const unsigned __int128 end = static_cast<unsigned __int128>(c.data_offset) + t.offset + t.nbytes;
    if (end > cur.size()) {
      const bool huge = end > std::numeric_limits<uint64_t>::max();
      cur.fail("truncated: tensor " + quoted(t.name) + " data ends at byte " +
               (huge ? std::string("> 2^64") : std::to_string(static_cast<uint64_t>(end))) +
               " but the file has " + std::to_string(cur.size()) + " bytes");
    }
  }
}

} // namespace

std::string value_type_name(gguf_value_type t) {
  switch (t) {
  case gguf_value_type::u8: return "u8";
  case gguf_value_type::i8: return "i8";
  case gguf_value_type::u16: return "u16";
  case gguf_value_type::i16: return "i16";
  case gguf_value_type::u32: return "u32";
  case gguf_value_type::i32: return "i32";
  case gguf_value_type::f32: return "f32";
  case gguf_value_type::boolean: return "bool";
  case gguf_value_type::string: return "string";
  case gguf_value_type::array: return "array";
  case gguf_value_type::u64: return "u64";
  case gguf_value_type::i64: return "i64";
  case gguf_value_type::f64: return "f64";
  }
  return "type" + std::to_string(static_cast<uint32_t>(t));
}

gguf_contents parse_gguf(const uint8_t* data, uint64_t size, const std::string& path) {
  gguf_cursor cur(data, size, path);
  gguf_contents c;
  read_header(cur, c);
  const auto n_tensors = cur.read<uint64_t>("header tensor count");
  const auto n_kv = cur.read<uint64_t>("header metadata count");
  if (n_kv > cur.remaining() / min_kv_bytes) {
    cur.fail("header declares " + std::to_string(n_kv) + " metadata entries but the remaining " +
             std::to_string(cur.remaining()) + " bytes hold at most " +
             std::to_string(cur.remaining() / min_kv_bytes));
  }
  if (n_tensors > (cur.remaining() - n_kv * min_kv_bytes) / min_tensor_info_bytes) {
    cur.fail("header declares " + std::to_string(n_tensors) + " tensors but the remaining " +
             std::to_string(cur.remaining()) + " bytes cannot hold that many tensor infos");
  }
  read_metadata(cur, c, n_kv);
  read_tensor_infos(cur, c, n_tensors);
  return c;
}

} // namespace conveyor::model
