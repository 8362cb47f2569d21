// Block geometry and names of the ggml tensor types (model-format.md §1.5, ggml type_traits).
// Indexed by the raw type id so that ids without a named enumerator (IQ*, TQ*, MXFP4) are still
// known to metadata tools; removed ids (4, 5, 31-33, 36-38) and ids >= 40 are unknown (0 / "type<N>").
#include "model/formats/ggml_type.hpp"

#include <array>

namespace conveyor::model {
namespace {

struct type_traits {
  const char* name = nullptr;  // nullptr: unknown id
  size_t elems = 0;
  size_t bytes = 0;
};

constexpr size_t qk_k = 256;

// NOTE: Q8_1 is 36 bytes (half d, half s) as in ggml-common.h; gguf-py's table says 40 (stale f32 layout).
constexpr std::array<type_traits, 40> traits_table{{
    {"F32", 1, 4},                                   // 0
    {"F16", 1, 2},                                   // 1
    {"Q4_0", 32, 2 + 16},                            // 2
    {"Q4_1", 32, 2 + 2 + 16},                        // 3
    {},                                              // 4 (removed Q4_2)
    {},                                              // 5 (removed Q4_3)
    {"Q5_0", 32, 2 + 4 + 16},                        // 6
    {"Q5_1", 32, 2 + 2 + 4 + 16},                    // 7
    {"Q8_0", 32, 2 + 32},                            // 8
    {"Q8_1", 32, 2 + 2 + 32},                        // 9
    {"Q2_K", qk_k, 2 + 2 + qk_k / 16 + qk_k / 4},    // 10
    {"Q3_K", qk_k, 2 + qk_k / 4 + qk_k / 8 + 12},    // 11
    {"Q4_K", qk_k, 2 + 2 + qk_k / 2 + 12},           // 12
    {"Q5_K", qk_k, 2 + 2 + qk_k / 2 + qk_k / 8 + 12},  // 13
    {"Q6_K", qk_k, 2 + qk_k / 2 + qk_k / 4 + qk_k / 16},  // 14
    {"Q8_K", qk_k, 4 + qk_k + qk_k / 8},             // 15
    {"IQ2_XXS", qk_k, 2 + qk_k / 4},                 // 16
    {"IQ2_XS", qk_k, 2 + qk_k / 4 + qk_k / 32},      // 17
    {"IQ3_XXS", qk_k, 2 + qk_k / 4 + qk_k / 8},      // 18
    {"IQ1_S", qk_k, 2 + qk_k / 8 + qk_k / 16},       // 19
    {"IQ4_NL", 32, 2 + 16},                          // 20
    {"IQ3_S", qk_k, 2 + qk_k / 4 + qk_k / 8 + qk_k / 32 + 4},  // 21
    {"IQ2_S", qk_k, 2 + qk_k / 4 + qk_k / 16},       // 22
    {"IQ4_XS", qk_k, 2 + 2 + qk_k / 2 + qk_k / 64},  // 23
    {"I8", 1, 1},                                    // 24
    {"I16", 1, 2},                                   // 25
    {"I32", 1, 4},                                   // 26
    {"I64", 1, 8},                                   // 27
    {"F64", 1, 8},                                   // 28
    {"IQ1_M", qk_k, qk_k / 8 + qk_k / 16 + qk_k / 32},  // 29
    {"BF16", 1, 2},                                  // 30
    {},                                              // 31 (removed Q4_0_4_4)
    {},                                              // 32 (removed Q4_0_4_8)
    {},                                              // 33 (removed Q4_0_8_8)
    {"TQ1_0", qk_k, 2 + 4 * 13},                     // 34
    {"TQ2_0", qk_k, 2 + 64},                         // 35
    {},                                              // 36 (removed IQ4_NL_4_4)
    {},                                              // 37 (removed IQ4_NL_4_8)
    {},                                              // 38 (removed IQ4_NL_8_8)
    {"MXFP4", 32, 1 + 16},                           // 39
}};

const type_traits* lookup(ggml_type t) {
  const auto id = static_cast<uint32_t>(t);
  if (id >= traits_table.size() || traits_table[id].name == nullptr) {
    return nullptr;
  }
  return &traits_table[id];
}

} // namespace

size_t block_elems(ggml_type t) {
  const type_traits* tr = lookup(t);
  return tr ? tr->elems : 0;
}

size_t block_bytes(ggml_type t) {
  const type_traits* tr = lookup(t);
  return tr ? tr->bytes : 0;
}

std::string type_name(ggml_type t) {
  const type_traits* tr = lookup(t);
  return tr ? std::string(tr->name) : "type" + std::to_string(static_cast<uint32_t>(t));
}

bool is_dequantizable(ggml_type t) {
  switch (t) {
  case ggml_type::f32: case ggml_type::f16: case ggml_type::bf16:
  case ggml_type::q4_0: case ggml_type::q4_1: case ggml_type::q5_0: case ggml_type::q5_1:
  case ggml_type::q8_0: case ggml_type::q4_k: case ggml_type::q5_k: case ggml_type::q6_k:
    return true;
  default:
    return false;
  }
}

} // namespace conveyor::model
