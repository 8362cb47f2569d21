// gguf_file::assemble: a GGUF view over memory someone else laid out (model/formats/hf_folder.cpp maps a
// Hugging Face folder this way). The same rules as the parser hold for what reaches the
// loaders: unique keys and tensor names, at most 4 dims, ne[0] a multiple of the type's block,
// sizes that fit 64 bits. Offsets are those a writer would give the tensors packed at 32 bytes.
#include "model/formats/gguf.hpp"
#include "model/formats/gguf_contents.hpp"
#include "model/formats/gguf_kvs.hpp"

namespace conveyor::model {
namespace {

constexpr uint64_t max_tensor_name_len = 63;  // llama.cpp GGML_MAX_NAME - 1, as the parser
constexpr uint32_t default_alignment = 32;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

/// Fills t.nbytes from type and ne; false when a dim is negative or the size overflows.
bool size_tensor(gguf_tensor_info& t) {
  const size_t blck = block_elems(t.type);
  if (blck == 0) return false;
  for (int d = 0; d < 4; ++d) {
    if (t.ne[d] < 0) return false;
  }
  uint64_t n = static_cast<uint64_t>(t.ne[0]) / blck;
  bool overflow = __builtin_mul_overflow(n, block_bytes(t.type), &n);
  for (int d = 1; d < 4; ++d) overflow = overflow || __builtin_mul_overflow(n, static_cast<uint64_t>(t.ne[d]), &n);
  t.nbytes = n;
  return !overflow;
}

} // namespace

gguf_file gguf_file::assemble(const std::string& path, std::vector<std::pair<std::string, gguf_value>> kvs,
                              std::vector<gguf_tensor_view> tensors, std::vector<std::shared_ptr<const void>> owners) {
  auto p = std::make_unique<impl>();
  p->path = path;
  p->assembled = true;
  p->owners = std::move(owners);
  gguf_contents& c = p->c;
  c.version = 3;
  c.alignment = default_alignment;
  c.kvs.reserve(kvs.size());
  for (auto& kv : kvs) {
    if (!c.kv_index.emplace(kv.first, c.kvs.size()).second) p->fail("duplicate metadata key " + quoted(kv.first));
    c.kvs.push_back(std::move(kv));
  }
  c.tensors.reserve(tensors.size());
  p->tensor_ptrs.reserve(tensors.size());
  uint64_t offset = 0;
  for (gguf_tensor_view& v : tensors) {
    gguf_tensor_info& t = v.info;
    const std::string ctx = "tensor " + quoted(t.name);
    if (t.name.empty() || t.name.size() > max_tensor_name_len) p->fail(ctx + " has an empty or too long name");
    if (t.n_dims > 4) p->fail(ctx + " has " + std::to_string(t.n_dims) + " dimensions (at most 4 are allowed)");
    if (!size_tensor(t)) p->fail(ctx + " has an unknown type, a negative dimension or a size that overflows");
    if (t.ne[0] % static_cast<int64_t>(block_elems(t.type)) != 0)
      p->fail(ctx + " has ne[0] = " + std::to_string(t.ne[0]) + ", not a multiple of the " + type_name(t.type) +
              " block size " + std::to_string(block_elems(t.type)));
    if (v.data == nullptr && t.nbytes != 0) p->fail(ctx + " has no data");
    t.offset = offset;
    offset += (t.nbytes + default_alignment - 1) / default_alignment * default_alignment;
    if (!c.tensor_index.emplace(t.name, c.tensors.size()).second) p->fail("duplicate tensor name " + quoted(t.name));
    c.tensors.push_back(std::move(t));
    p->tensor_ptrs.push_back(v.data);
  }
  return gguf_file(std::move(p));
}

gguf_value gguf_u32(uint32_t x) { return gguf_value{x}; }
gguf_value gguf_f32(float x) { return gguf_value{x}; }
gguf_value gguf_bool(bool x) { return gguf_value{x}; }
gguf_value gguf_str(std::string s) { return gguf_value{std::move(s)}; }
gguf_value gguf_strs(std::vector<std::string> items) {
  gguf_array a{gguf_value_type::string, {}};
  a.items.reserve(items.size());
  for (std::string& s : items) a.items.push_back(gguf_value{std::move(s)});
  return gguf_value{std::move(a)};
}
gguf_value gguf_i32s(const std::vector<int32_t>& items) {
  gguf_array a{gguf_value_type::i32, {}};
  a.items.reserve(items.size());
  for (int32_t x : items) a.items.push_back(gguf_value{x});
  return gguf_value{std::move(a)};
}
gguf_value gguf_f32s(const std::vector<float>& items) {
  gguf_array a{gguf_value_type::f32, {}};
  a.items.reserve(items.size());
  for (float x : items) a.items.push_back(gguf_value{x});
  return gguf_value{std::move(a)};
}

} // namespace conveyor::model
