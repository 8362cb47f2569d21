// Test support: the Llama forward pass written the straightforward way (one token at a time,
// double precision, no batching, no paging), reading the GGUF on its own. The oracle for the
// CPU executor's logits.
#pragma once

#include <vector>

#include "engine/types.hpp"

namespace conveyor::model {

class gguf_file;

/// Logits at the last position of `tokens`. With kv_fp16, keys and values are rounded to fp16
/// when cached (as llama.cpp's F16 KV cache does).
std::vector<double> reference_logits(const gguf_file& f, const std::vector<token_id>& tokens, bool kv_fp16);

/// max |a - b| / max |b|.
double max_rel_error(const std::vector<float>& a, const std::vector<double>& b);

} // namespace conveyor::model
