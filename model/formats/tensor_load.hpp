// One tensor of a GGUF file, checked against the shape a loader expects: a view of its blocks
// (model/cpu/llama_weights.cpp keeps them in their block type) or its values as f32 (norms,
// biases; the CUDA executor's upload, gpu/weights.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/formats/tensor_table.hpp"

namespace conveyor::model {

class gguf_file;
struct gguf_tensor_info;

/// The tensor types conveyor loads, for error messages: "F32 F16 BF16 Q4_0 ... Q6_K".
extern const char* const kSupportedTensorTypes;

/// The tensor `name` of shape ne = [ne0, ne1]. Throws model_error when it is missing or has
/// another shape.
const gguf_tensor_info& checked_tensor(const gguf_file& f, const std::string& name, int64_t ne0, int64_t ne1);

/// Dequantizes tensor `name` of shape ne = [ne0, ne1] (ne0 contiguous) into a row-major
/// (ne1, ne0) f32 matrix. Throws model_error when it is missing, has another shape, or has
/// a type conveyor cannot dequantize.
std::vector<float> load_tensor_f32(const gguf_file& f, const std::string& name, int64_t ne0, int64_t ne1 = 1);

/// load_tensor_f32 of the table's tensor `id` (model/formats/tensor_table.hpp) in `layer`, shaped by `p`.
std::vector<float> load_tensor_f32(const gguf_file& f, tensor_id id, const tensor_params& p, int32_t layer = 0);

/// The tensors of group `g` in `layer` as f32, end to end in slot order: the fused vector (Q, K
/// and V biases as the fused QKV product's row lays them out).
std::vector<float> load_group_f32(const gguf_file& f, tensor_group g, const tensor_params& p, int32_t layer);

} // namespace conveyor::model
