// One step's metadata, flattened on the host into a pinned buffer and uploaded with one copy.
// Two host buffers, used in turn (select()): step N+1 is filled while step N's upload may still
// wait in the stream, which reads its pinned source only when it runs.
// The device buffer's layout is fixed by the capacities, so a captured CUDA graph reads each
// step's values from the same addresses:
//
//   tokens | positions | token_seq | tile_first | tile_count    int32 (cap.tokens each)
//   sample_rows                                                 int32 (cap.samples)
//   seq_block_off                                               int32 (cap.seqs + 2)
//   sampling                                                    sample_param (cap.samples)
//   split_len                                                   int32 (1)
//   blocks                                                      int32 (cap.blocks)   <- last: only
//                                                               the used prefix is copied
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/step.hpp"
#include "gpu/kernels.hpp"

namespace conveyor::gpu {

struct step_caps {
  int32_t tokens = 0;  ///< most tokens in one step
  int32_t seqs = 0;    ///< most sequences in one step
  int64_t blocks = 0;  ///< most block-table entries in one step
  int32_t samples = 0; ///< most sampled rows in one step (0: seqs; more with drafted rows)
  int32_t sample_cap() const { return samples > 0 ? samples : seqs; }
};

/// What the launches of one step need to know on the host.
struct step_shape {
  int32_t tokens = 0, seqs = 0, tiles = 0, max_tile_rows = 0, samples = 0, max_ctx = 0;
  int32_t previous_samples = 0;  ///< k_previous_sample tokens
  int32_t prefill_tiles = 0;  ///< tiles of two tokens or more (prompt chunks: launch_attention)
  /// Batch-invariant layout only: the decode rows (a sampling sequence's last token and its
  /// drafts), placed first, each a tile of its own (the first decode_rows tiles).
  int32_t decode_rows = 0;
  size_t upload_bytes = 0;
};

class step_meta_buffer {
public:
  /// decode_rows_first: the batch-invariant layout (fill()).
  explicit step_meta_buffer(const step_caps& caps, bool decode_rows_first = false);
  ~step_meta_buffer();
  step_meta_buffer(const step_meta_buffer&) = delete;
  step_meta_buffer& operator=(const step_meta_buffer&) = delete;

  /// Makes host buffer `slot` (0 or 1) the one fill(), set_split_len() and upload() use. The
  /// caller keeps a buffer until the step that uploaded from it has been synchronized.
  void select(int slot) { host_ = hosts_[slot & 1]; }
  /// Flattens `plan` into the host mirror. A k_previous_sample token is written as -1 - r, r its
  /// sequence's row in the previous step's samples (`prev_row`, which must know the sequence):
  /// the embedding reads it from that step's sampled ids on the device. Prompt chunks become query tiles of up to
  /// `tile_tokens` tokens, decode tokens tiles of one. With pad_to > plan size (a decode-only
  /// step run as a graph bucket) the extra rows are token 0 at position 0 in `pad_block`, sampled
  /// greedily and ignored. A sampling sequence with d drafts samples its last 1 + d rows, row i
  /// with position num_computed + n - d + i's coin; samples are in plan order. With
  /// decode_rows_first, the decode sequences' rows (those of a sampling sequence whose tokens are
  /// its newest known one and its drafts) come first, each a tile of one, then the prompt chunks'
  /// (row_of() maps a plan row to its step row). The plan must fit the capacities (checked by the
  /// caller).
  step_shape fill(const step_plan& plan, int32_t pad_to, int32_t tile_tokens, int32_t group, int32_t block_size,
                  int32_t pad_block, const std::unordered_map<seq_id, int32_t>& prev_row = {});
  /// Sets the step's attention split length (read by graphs through step_meta::split_len).
  void set_split_len(int32_t positions);
  int32_t split_len() const { return *reinterpret_cast<const int32_t*>(host_ + off_split_); }
  /// The step row of the last filled plan's token row `plan_row` (its tokens in plan order).
  int32_t row_of(int32_t plan_row) const { return row_map_.empty() ? plan_row : row_map_[static_cast<size_t>(plan_row)]; }
  /// Copies the filled part to the device on `stream`.
  void upload(const step_shape& shape, cudaStream_t stream) const;
  /// Device pointers; the same for every step.
  const step_meta& device() const { return dev_view_; }
  const step_caps& caps() const { return caps_; }

private:
  step_caps caps_;
  bool decode_first_ = false;
  std::vector<int32_t> row_map_;  // plan row -> step row (decode_rows_first only)
  size_t off_tokens_ = 0, off_pos_ = 0, off_seq_ = 0, off_tfirst_ = 0, off_tcount_ = 0, off_rows_ = 0, off_blockoff_ = 0,
         off_sampling_ = 0, off_split_ = 0, off_blocks_ = 0, total_ = 0;
  unsigned char* hosts_[2] = {nullptr, nullptr};
  unsigned char* host_ = nullptr;  // the selected one
  unsigned char* dev_ = nullptr;
  step_meta dev_view_;
};

} // namespace conveyor::gpu
