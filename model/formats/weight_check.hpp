// A model whose weights hold NaN or Inf is refused at load (one line naming the tensor and the
// first bad element), instead of serving NaN logits: every value of F32/F16/BF16 tensors is
// checked, and of the quantized types the block scales (fp16 d and m/dmin), the only parts that
// can be non-finite (the quants are small integers).
#pragma once

#include <optional>
#include <string>

#include "model/formats/gguf.hpp"

namespace conveyor::model {

/// "" when every weight of `f` is finite, else what is wrong ("tensor 'blk.3.ffn_up.weight':
/// element 1234 is NaN"). Types it cannot read are left to the loader.
std::string find_non_finite_weight(const gguf_file& f);

/// Throws model_error naming the file, the tensor and the fix when a weight is NaN or Inf.
void check_weights_finite(const gguf_file& f);

} // namespace conveyor::model
