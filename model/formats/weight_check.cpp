#include "model/formats/weight_check.hpp"

#include <cmath>
#include <cstring>

#include "model/formats/ggml_type.hpp"
#include "model/formats/llama_config.hpp"

namespace conveyor::model {
namespace {

// An fp16 or bf16 value with every exponent bit set is Inf or NaN.
bool half_bad(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return (h & 0x7C00) == 0x7C00;
}
bool bf16_bad(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return (h & 0x7F80) == 0x7F80;
}

// Byte offsets of the fp16 scales in one block of a quantized type (ggml's block layouts).
struct scale_layout {
  int count = 0;
  size_t at[2] = {0, 0};
};
scale_layout scales_of(ggml_type t) {
  switch (t) {
    case ggml_type::q4_0: case ggml_type::q5_0: case ggml_type::q8_0: return {1, {0, 0}};
    case ggml_type::q4_1: case ggml_type::q5_1: case ggml_type::q4_k: case ggml_type::q5_k: return {2, {0, 2}};
    case ggml_type::q6_k: return {1, {208, 0}};  // ql[128] qh[64] scales[16] d
    default: return {};
  }
}

std::string element(int64_t i, const char* what) { return "element " + std::to_string(i) + " is " + what; }

// "" or what is wrong with one tensor.
std::string check_tensor(const gguf_file& f, const gguf_tensor_info& t) {
  const uint8_t* p = f.tensor_data(t);
  const int64_t n = t.num_elements();
  switch (t.type) {
    case ggml_type::f32:
      for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        if (!std::isfinite(v)) return element(i, std::isnan(v) ? "NaN" : "Inf");
      }
      return {};
    case ggml_type::f16:
      for (int64_t i = 0; i < n; ++i)
        if (half_bad(p + 2 * i)) return element(i, "NaN or Inf");
      return {};
    case ggml_type::bf16:
      for (int64_t i = 0; i < n; ++i)
        if (bf16_bad(p + 2 * i)) return element(i, "NaN or Inf");
      return {};
    default: break;
  }
  const scale_layout s = scales_of(t.type);
  if (s.count == 0) return {};
  const size_t bb = block_bytes(t.type), be = block_elems(t.type);
  const int64_t blocks = n / static_cast<int64_t>(be);
  for (int64_t b = 0; b < blocks; ++b)
    for (int k = 0; k < s.count; ++k)
      if (half_bad(p + static_cast<size_t>(b) * bb + s.at[k]))
        return "the scale of block " + std::to_string(b) + " (elements " + std::to_string(b * static_cast<int64_t>(be)) + "..) is NaN or Inf";
  return {};
}

} // namespace

std::string find_non_finite_weight(const gguf_file& f) {
  for (const auto& t : f.tensors()) {
    if (block_bytes(t.type) == 0 || t.nbytes < static_cast<uint64_t>(t.num_elements() / static_cast<int64_t>(block_elems(t.type))) * block_bytes(t.type))
      continue;  // unknown or short: the loader names it
    if (auto why = check_tensor(f, t); !why.empty()) return "tensor '" + t.name + "': " + why;
  }
  return {};
}

void check_weights_finite(const gguf_file& f) {
  if (auto why = find_non_finite_weight(f); !why.empty())
    throw model_error(f.path() + ": " + why + "; the file is damaged or was converted wrongly (it would give NaN outputs): "
                      "convert or download it again");
}

} // namespace conveyor::model
