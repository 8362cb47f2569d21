// The CPU KV cache: a pool of fixed-size blocks shared by all sequences, addressed through
// each sequence's block table, and attention of a KV head's query heads over it.
//
//   k, v: (n_layer, num_blocks, block_size, n_head_kv, head_dim) f32, values fp16-rounded
//   position p of a sequence -> block table[p / block_size], slot p % block_size
#pragma once

#include <cstdint>
#include <vector>

#include "engine/types.hpp"

namespace conveyor::model {

class paged_kv {
public:
  paged_kv(int32_t n_layer, int32_t num_blocks, int32_t block_size, int32_t n_head_kv, int32_t head_dim);

  /// Bytes one block takes across all layers (K and V).
  static int64_t block_bytes(int32_t n_layer, int32_t block_size, int32_t n_head_kv, int32_t head_dim);

  float* k(int32_t layer, block_id b, int32_t slot) { return k_.data() + offset(layer, b, slot); }
  float* v(int32_t layer, block_id b, int32_t slot) { return v_.data() + offset(layer, b, slot); }
  const float* k(int32_t layer, block_id b, int32_t slot) const { return k_.data() + offset(layer, b, slot); }
  const float* v(int32_t layer, block_id b, int32_t slot) const { return v_.data() + offset(layer, b, slot); }

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }

  /// Causal attention of `n_q` query heads that share kv head `kv_head` (GQA) at position `pos`
  /// over positions 0..pos of the sequence with `table`; each K and V row is read once for all
  /// of them. q and out: n_q * head_dim floats, head i at i * head_dim. `scores` must hold
  /// n_q * (pos+1) floats. fp16_inputs: round the query and the probabilities to fp16 before
  /// their products (llama.cpp's F16 KV matmuls). A head's result does not depend on n_q.
  void attend(int32_t layer, const block_id* table, int32_t pos, int32_t kv_head, int32_t n_q, const float* q,
              float scale, float* out, float* scores, bool fp16_inputs) const;

private:
  int64_t offset(int32_t layer, block_id b, int32_t slot) const {
    return ((static_cast<int64_t>(layer) * num_blocks_ + b) * block_size_ + slot) * row_;
  }
  int32_t num_blocks_, block_size_, n_head_kv_, head_dim_;
  int64_t row_;  // n_head_kv * head_dim
  std::vector<float> k_, v_;
};

} // namespace conveyor::model
