// Shape- and type-checked reads of one GGUF tensor.
#include "model/formats/tensor_load.hpp"

#include <algorithm>

#include "model/formats/dequant.hpp"
#include "model/formats/gguf.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::model {
namespace {

std::string shape_str(const gguf_tensor_info& t) {
  std::string s = "[";
  for (uint32_t i = 0; i < std::max<uint32_t>(t.n_dims, 1); ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "]";
}

} // namespace

const char* const kSupportedTensorTypes = "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K";

const gguf_tensor_info& checked_tensor(const gguf_file& f, const std::string& name, int64_t ne0, int64_t ne1) {
  const gguf_tensor_info* t = f.find_tensor(name);
  if (!t) throw model_error(f.path() + ": missing tensor '" + name + "'");
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
    throw model_error(f.path() + ": tensor '" + name + "' has shape " + shape_str(*t) + ", expected [" +
                      std::to_string(ne0) + ", " + std::to_string(ne1) + "]");
  return *t;
}

std::vector<float> load_tensor_f32(const gguf_file& f, const std::string& name, int64_t ne0, int64_t ne1) {
  const gguf_tensor_info& t = checked_tensor(f, name, ne0, ne1);
  if (!is_dequantizable(t.type))
    throw model_error(f.path() + ": tensor '" + name + "' has type " + type_name(t.type) +
                      ", which conveyor cannot load (supported: " + kSupportedTensorTypes + ")");
  std::vector<float> out(static_cast<size_t>(ne0 * ne1));
  const uint8_t* src = f.tensor_data(t);
  const size_t row_bytes = static_cast<size_t>(ne0) / block_elems(t.type) * block_bytes(t.type);
  for (int64_t r = 0; r < ne1; ++r)
    dequantize_row(t.type, src + static_cast<size_t>(r) * row_bytes, out.data() + r * ne0, ne0);
  return out;
}

std::vector<float> load_tensor_f32(const gguf_file& f, tensor_id id, const tensor_params& p, int32_t layer) {
  const tensor_row& r = tensor_spec(id);
  return load_tensor_f32(f, gguf_name(r, layer), p.ne0(r), p.ne1(r));
}

std::vector<float> load_group_f32(const gguf_file& f, tensor_group g, const tensor_params& p, int32_t layer) {
  std::vector<float> out;
  for (const tensor_row& r : group_rows(g)) {
    const std::vector<float> v = load_tensor_f32(f, r.id, p, layer);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

} // namespace conveyor::model
