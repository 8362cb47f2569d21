// Dequantization of ggml blocks to f32 (model-format.md §2), plus IEEE half / bfloat16 helpers.
#pragma once

#include <cstdint>

#include "model/formats/ggml_type.hpp"

namespace conveyor::model {

float fp16_to_fp32(uint16_t h);
/// Round-to-nearest-even, with subnormals, inf and NaN handled.
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
/// Round-to-nearest-even (ggml's rule; NaN stays a quiet NaN).
uint16_t fp32_to_bf16(float f);

/// Dequantizes `n` elements (a multiple of block_elems(t)) starting at `src` into `dst`.
/// Precondition: is_dequantizable(t).
void dequantize_row(ggml_type t, const void* src, float* dst, int64_t n);

} // namespace conveyor::model
