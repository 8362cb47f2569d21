// The ggml tensor types conveyor knows, with their block geometry (model-format.md §1.5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor::model {

enum class ggml_type : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, bf16 = 30,
};

/// Elements per block (1 for plain types). 0 if `t` is unknown.
size_t block_elems(ggml_type t);
/// Bytes per block. 0 if `t` is unknown.
size_t block_bytes(ggml_type t);
/// "Q4_1", "F32", ...; "type<N>" for an unknown id.
std::string type_name(ggml_type t);
/// True for the types dequantize_row() handles: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K.
bool is_dequantizable(ggml_type t);

} // namespace conveyor::model
