// The CPU KV cache: a pool of fixed-size blocks shared by all sequences, addressed through
// each sequence's block table, and attention of a KV head's query heads over it.
//
//   k: (n_layer, num_blocks, n_head_kv, head_dim, block_size): each block's keys transposed, so
//      that a vector holds one dimension of consecutive keys (attn_kernels.hpp: keys in lanes)
//   v: (n_layer, num_blocks, n_head_kv, block_size, head_dim): a kv head's values of a block in
//      one piece, as its keys are (the attention of one kv head reads both as whole pieces)
//   both either IEEE half (kv_storage::f16, llama.cpp's F16 KV cache, half the memory) or f32
//   (kv_storage::f32, values as stored: the exact mode that the double-precision tests compare
//   against)
//   position p of a sequence -> block table[p / block_size], slot p % block_size
#pragma once

#include <cstdint>
#include <vector>

#include "engine/types.hpp"
#include "model/cpu/lazy_array.hpp"
#include "model/cpu/qmm.hpp"

namespace conveyor::model {

enum class kv_storage { f16, f32 };

class paged_kv {
public:
  /// `isa`: the score kernels' (attn_kernels.hpp); every ISA gives the same bits.
  paged_kv(int32_t n_layer, int32_t num_blocks, int32_t block_size, int32_t n_head_kv, int32_t head_dim,
           kv_storage s = kv_storage::f16, cpu_isa isa = cpu_best_isa());

  /// Bytes one block takes across all layers (K and V): 2 per value for f16, 4 for f32.
  static int64_t block_bytes(int32_t n_layer, int32_t block_size, int32_t n_head_kv, int32_t head_dim, kv_storage s);

  kv_storage storage() const { return storage_; }
  /// Bytes of K and V in memory now: the pool is reserved at start and a page is committed the
  /// first time a position in it is written (it stays, reused, until the pool goes).
  int64_t resident_bytes() const;
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }

  /// Writes the K and V rows (n_head_kv * head_dim floats each) of one position; rounds them to
  /// fp16 (round to nearest even) for f16 storage, stores them as they are for f32.
  void store(int32_t layer, block_id b, int32_t slot, const float* k, const float* v);
  /// Reads them back as floats.
  void load(int32_t layer, block_id b, int32_t slot, float* k, float* v) const;

  /// Causal attention of `n_q` query heads that share kv head `kv_head` (GQA) at position `pos`
  /// over positions 0..pos of the sequence with `table`; each K and V row is read once for all
  /// of them. q and out: n_q * head_dim floats, head i at i * head_dim. fp16_inputs: round the
  /// query and the probabilities to fp16 before their products (llama.cpp's F16 KV matmuls). A
  /// head's result does not depend on n_q. f16 values are widened (F16C) as they are read: the
  /// result is bit for bit that of an f32 storage holding the same values. The scores live in a
  /// buffer of the calling thread.
  void attend(int32_t layer, const block_id* table, int32_t pos, int32_t kv_head, int32_t n_q, const float* q,
              float scale, float* out, bool fp16_inputs) const;
  /// The same for `n_rows` consecutive positions pos0 .. pos0 + n_rows - 1 of one sequence (a
  /// prompt chunk, a decode with drafts): row r's queries at q + r * q_stride, its result at
  /// out + r * out_stride; each K row is read once for every row and head, each V row once for
  /// every row (its heads together).
  /// Row r's result is bit for bit that of attend() at position pos0 + r alone.
  void attend(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q,
              const float* q, int64_t q_stride, float scale, float* out, int64_t out_stride, bool fp16_inputs) const;
  /// The same for `n_kv` consecutive kv heads from kv_head0, each with its `n_q` query heads (row
  /// r's queries of kv head kv_head0 + h at q + r * q_stride + h * n_q * head_dim, its results
  /// likewise from out): a block's keys and values of all of them are read in one sweep (as the
  /// executor's work items, 2-thread decode steps 12-19% faster than an item a kv head). Each
  /// head's result is bit for bit that of the single-head call.
  void attend_heads(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head0, int32_t n_kv,
                    int32_t n_q, const float* q, int64_t q_stride, float scale, float* out, int64_t out_stride,
                    bool fp16_inputs) const;

  /// attend() in two parts, so that one long run's attention spreads over threads: score_keys
  /// writes the raw scores (q . k times scale) of keys j0 .. j1 - 1 (both multiples of
  /// block_size, j1 cut at the run's last position) for row r and query head i at s + (r * n_q +
  /// i) * s_stride + j; the last chunk of keys may write its lanes past the run's last position,
  /// so rows of score_stride(pos0 + n_rows) floats leave room. Once every key has its score,
  /// attend_values turns each row of s into its softmax (in place) and writes the result. Together
  /// they give bit for bit what attend() gives: a score depends on its query and key alone, and
  /// the rest is attend()'s own code. n_q: 1 .. split_max_heads().
  void score_keys(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q,
                  const float* q, int64_t q_stride, float scale, bool fp16_inputs, int32_t j0, int32_t j1, float* s,
                  int64_t s_stride) const;
  void attend_values(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head, int32_t n_q,
                     float* s, int64_t s_stride, bool fp16_inputs, float* out, int64_t out_stride) const;
  /// Floats a row of score_keys' scores takes for `positions` keys (room for the last chunk's lanes).
  int32_t score_stride(int32_t positions) const;
  int32_t split_max_heads() const;

private:
  void check_split_heads(int32_t n_q) const;
  /// f(rows_view) of this layer's storage (paged_kv.cpp).
  template <class F>
  void with_view(int32_t layer, const block_id* table, int32_t pos0, int32_t n_rows, int32_t kv_head0, int32_t n_kv, int32_t n_q,
                 const F& f) const;
  /// Where block b of `layer` starts in k and in v.
  int64_t offset(int32_t layer, block_id b) const {
    return (static_cast<int64_t>(layer) * num_blocks_ + b) * block_size_ * row_;
  }
  kv_storage storage_;
  cpu_isa isa_;
  int32_t num_blocks_, block_size_, n_head_kv_, head_dim_;
  int64_t row_;                     // n_head_kv * head_dim
  // f16 storage (the f32 ones stay empty), and vice versa; reserved, committed as written.
  lazy_array<uint16_t> k16_, v16_;
  lazy_array<float> k32_, v32_;
};

} // namespace conveyor::model
