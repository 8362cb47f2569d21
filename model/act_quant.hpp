// llama.cpp's CPU backend does not multiply f32 activations with quantized weights: it first
// converts each activation row to the weight type's "dot partner" (Q8_1 for Q4_1/Q5_1, Q8_0 for
// Q4_0/Q5_0/Q8_0, Q8_K for K-quants, fp16/bf16 for F16/BF16; model-format.md §4.1). That
// rounding moves logits by tenths, enough to flip greedy choices. To reproduce llama.cpp's
// tokens, the executor rounds activations the same way (quantize, then dequantize in place)
// before its f32 GEMMs.
#pragma once

#include <cstdint>

#include "model/ggml_type.hpp"

namespace conveyor::model {

enum class act_format { none, q8_0, q8_1, q8_k, f16, bf16 };

/// The format llama.cpp converts activations to before multiplying them by weights of type `t`.
act_format act_format_for(ggml_type t);

/// Rounds `n_rows` rows of `n_cols` floats in place to what `f` can represent (block-wise scales
/// as llama.cpp's x86 quantizers compute them). n_cols must be a multiple of the block size.
void round_activations(act_format f, float* x, int64_t n_rows, int64_t n_cols);

} // namespace conveyor::model
