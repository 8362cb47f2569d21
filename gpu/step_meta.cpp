#include "gpu/step_meta.hpp"

#include <algorithm>

#include "gpu/check.hpp"

namespace conveyor::gpu {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

} // namespace

step_meta_buffer::step_meta_buffer(const step_caps& caps, bool decode_rows_first) : caps_(caps), decode_first_(decode_rows_first) {
  size_t at = 0;
  auto place = [&](size_t bytes) {
    const size_t o = at;
    at = align16(at + bytes);
    return o;
  };
  const size_t t4 = sizeof(int32_t) * static_cast<size_t>(caps.tokens);
  off_tokens_ = place(t4);
  off_pos_ = place(t4);
  off_seq_ = place(t4);
  off_tfirst_ = place(t4);
  off_tcount_ = place(t4);
  off_rows_ = place(sizeof(int32_t) * static_cast<size_t>(caps.sample_cap()));
  off_blockoff_ = place(sizeof(int32_t) * (static_cast<size_t>(caps.seqs) + 2));
  off_sampling_ = place(sizeof(sample_param) * static_cast<size_t>(caps.sample_cap()));
  off_split_ = place(sizeof(int32_t));
  off_blocks_ = place(sizeof(int32_t) * static_cast<size_t>(caps.blocks + 1));
  total_ = at;
  void* d = nullptr;
  for (auto& h : hosts_) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, total_));
    h = static_cast<unsigned char*>(p);
  }
  host_ = hosts_[0];
  CUDA_CHECK(cudaMalloc(&d, total_));
  dev_ = static_cast<unsigned char*>(d);
  auto dev = [&](size_t off) { return reinterpret_cast<const int32_t*>(dev_ + off); };
  dev_view_.tokens = dev(off_tokens_);
  dev_view_.positions = dev(off_pos_);
  dev_view_.token_seq = dev(off_seq_);
  dev_view_.tile_first = dev(off_tfirst_);
  dev_view_.tile_count = dev(off_tcount_);
  dev_view_.sample_rows = dev(off_rows_);
  dev_view_.seq_block_off = dev(off_blockoff_);
  dev_view_.sampling = reinterpret_cast<const sample_param*>(dev_ + off_sampling_);
  dev_view_.blocks = dev(off_blocks_);
  dev_view_.split_len = dev(off_split_);
  for (int slot : {1, 0}) {
    select(slot);
    set_split_len(0);
  }
}

void step_meta_buffer::set_split_len(int32_t positions) { *reinterpret_cast<int32_t*>(host_ + off_split_) = positions; }

step_meta_buffer::~step_meta_buffer() {
  for (auto* h : hosts_) cudaFreeHost(h);
  cudaFree(dev_);
}

step_shape step_meta_buffer::fill(const step_plan& plan, int32_t pad_to, int32_t tile_tokens, int32_t group,
                                  int32_t block_size, int32_t pad_block, const std::unordered_map<seq_id, int32_t>& prev_row) {
  auto i32 = [&](size_t off) { return reinterpret_cast<int32_t*>(host_ + off); };
  int32_t* tokens = i32(off_tokens_);
  int32_t* pos = i32(off_pos_);
  int32_t* tseq = i32(off_seq_);
  int32_t* tfirst = i32(off_tfirst_);
  int32_t* tcount = i32(off_tcount_);
  int32_t* rows = i32(off_rows_);
  int32_t* boff = i32(off_blockoff_);
  int32_t* blocks = i32(off_blocks_);
  sample_param* sp = reinterpret_cast<sample_param*>(host_ + off_sampling_);

  step_shape sh;
  int32_t nb = 0;
  // Rows in plan order, or (batch-invariant layout) every sequence's decode rows (positions from
  // num_prompt_tokens on) first, one-row tiles, then the prompt rows in tiles of tile_tokens.
  const size_t n_seqs = plan.seqs.size();
  std::vector<int32_t> seq_of(n_seqs, -1), split_at(n_seqs, 0), first_row(n_seqs, 0), first_decode_row(n_seqs, 0);
  const auto place = [&](size_t k, int32_t from, int32_t to, bool decode) {
    const scheduled_seq& s = plan.seqs[k];
    const int32_t n = static_cast<int32_t>(s.tokens.size()), end = s.num_computed_tokens + n;
    if (seq_of[k] < 0) {
      seq_of[k] = sh.seqs++;
      boff[seq_of[k]] = nb;
      for (int32_t b = 0, used = (end + block_size - 1) / block_size; b < used; ++b) blocks[nb++] = s.block_table[static_cast<size_t>(b)];
      sh.max_ctx = std::max(sh.max_ctx, end);
    }
    (decode ? first_decode_row[k] : first_row[k]) = sh.tokens;
    for (int32_t i = from; i < to; ++i) {
      const int32_t r = sh.tokens + i - from;
      const token_id t = s.tokens[static_cast<size_t>(i)];
      tokens[r] = t == k_previous_sample ? -1 - prev_row.at(s.id) : t;
      sh.previous_samples += t == k_previous_sample ? 1 : 0;
      pos[r] = s.num_computed_tokens + i;
      tseq[r] = seq_of[k];
    }
    const int32_t per_tile = n == 1 || decode ? 1 : tile_tokens;
    for (int32_t i = from; i < to; i += per_tile) {
      tfirst[sh.tiles] = sh.tokens + i - from;
      tcount[sh.tiles] = std::min(per_tile, to - i);
      sh.max_tile_rows = std::max(sh.max_tile_rows, tcount[sh.tiles] * group);
      sh.prefill_tiles += tcount[sh.tiles] > 1;
      ++sh.tiles;
    }
    sh.tokens += to - from;
  };
  for (size_t k = 0; k < n_seqs; ++k) {
    const auto& s = plan.seqs[k];
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    split_at[k] = decode_first_ ? std::clamp(s.num_prompt_tokens - s.num_computed_tokens, 0, n) : n;
  }
  if (decode_first_) {
    for (size_t k = 0; k < n_seqs; ++k)
      if (split_at[k] < static_cast<int32_t>(plan.seqs[k].tokens.size()))
        place(k, split_at[k], static_cast<int32_t>(plan.seqs[k].tokens.size()), true);
    sh.decode_rows = sh.tokens;
  }
  for (size_t k = 0; k < n_seqs; ++k)
    if (split_at[k] > 0) place(k, 0, split_at[k], false);
  // The step row of sequence k's token i.
  const auto step_row = [&](size_t k, int32_t i) { return i < split_at[k] ? first_row[k] + i : first_decode_row[k] + i - split_at[k]; };
  row_map_.clear();
  if (decode_first_)
    for (size_t k = 0; k < n_seqs; ++k)
      for (int32_t i = 0; i < static_cast<int32_t>(plan.seqs[k].tokens.size()); ++i) row_map_.push_back(step_row(k, i));
  // Samples in plan order: a drafted sequence's last 1 + num_drafts rows, each with its position.
  for (size_t k = 0; k < plan.seqs.size(); ++k) {
    const scheduled_seq& s = plan.seqs[k];
    if (!s.sample) continue;
    const int32_t n = static_cast<int32_t>(s.tokens.size()), end = s.num_computed_tokens + n;
    for (int32_t i = 0; i <= s.num_drafts; ++i) {
      rows[sh.samples] = step_row(k, n - 1 - s.num_drafts + i);
      sample_param& p = sp[sh.samples++];
      p.temperature = s.sampling.temperature;
      p.top_p = s.sampling.top_p;
      p.min_p = s.sampling.min_p;
      p.top_k = s.sampling.top_k;
      p.seed = s.sampling.seed;
      p.position = end - s.num_drafts + i;
    }
  }
  if (pad_to > sh.tokens) {  // padding rows share one pseudo-sequence owning only the pad block
    const int32_t pad_seq = sh.seqs;
    boff[pad_seq] = nb;
    blocks[nb++] = pad_block;
    for (int32_t r = sh.tokens; r < pad_to; ++r) {
      tokens[r] = 0;
      pos[r] = 0;
      tseq[r] = pad_seq;
      tfirst[sh.tiles] = r;
      tcount[sh.tiles++] = 1;
      rows[sh.samples] = r;
      sp[sh.samples++] = sample_param{};
    }
    sh.max_tile_rows = std::max(sh.max_tile_rows, group);
    sh.tokens = pad_to;
    sh.seqs = pad_seq + 1;
    if (decode_first_) sh.decode_rows = pad_to;  // a decode-only step's padding rows are decode rows too
  }
  boff[sh.seqs] = nb;
  sh.upload_bytes = off_blocks_ + sizeof(int32_t) * static_cast<size_t>(nb);
  return sh;
}

void step_meta_buffer::upload(const step_shape& shape, cudaStream_t stream) const {
  CUDA_CHECK(cudaMemcpyAsync(dev_, host_, shape.upload_bytes, cudaMemcpyHostToDevice, stream));
}

} // namespace conveyor::gpu
