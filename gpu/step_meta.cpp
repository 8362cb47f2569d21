#include "gpu/step_meta.hpp"

#include <algorithm>

#include "gpu/check.hpp"

namespace conveyor::gpu {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

} // namespace

step_meta_buffer::step_meta_buffer(const step_caps& caps) : caps_(caps) {
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
  off_rows_ = place(sizeof(int32_t) * static_cast<size_t>(caps.seqs));
  off_blockoff_ = place(sizeof(int32_t) * (static_cast<size_t>(caps.seqs) + 2));
  off_sampling_ = place(sizeof(sample_param) * static_cast<size_t>(caps.seqs));
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
  for (const scheduled_seq& s : plan.seqs) {
    const int32_t n = static_cast<int32_t>(s.tokens.size()), row0 = sh.tokens, seq = sh.seqs++;
    const int32_t end = s.num_computed_tokens + n, used_blocks = (end + block_size - 1) / block_size;
    boff[seq] = nb;
    for (int32_t b = 0; b < used_blocks; ++b) blocks[nb++] = s.block_table[static_cast<size_t>(b)];
    for (int32_t i = 0; i < n; ++i) {
      const token_id t = s.tokens[static_cast<size_t>(i)];
      tokens[row0 + i] = t == k_previous_sample ? -1 - prev_row.at(s.id) : t;
      sh.previous_samples += t == k_previous_sample ? 1 : 0;
      pos[row0 + i] = s.num_computed_tokens + i;
      tseq[row0 + i] = seq;
    }
    const int32_t per_tile = n == 1 ? 1 : tile_tokens;
    for (int32_t i = 0; i < n; i += per_tile) {
      tfirst[sh.tiles] = row0 + i;
      tcount[sh.tiles] = std::min(per_tile, n - i);
      sh.max_tile_rows = std::max(sh.max_tile_rows, tcount[sh.tiles] * group);
      sh.prefill_tiles += tcount[sh.tiles] > 1;
      ++sh.tiles;
    }
    if (s.sample) {
      rows[sh.samples] = row0 + n - 1;
      sample_param& p = sp[sh.samples++];
      p.temperature = s.sampling.temperature;
      p.top_p = s.sampling.top_p;
      p.min_p = s.sampling.min_p;
      p.top_k = s.sampling.top_k;
      p.seed = s.sampling.seed;
      p.position = end;
    }
    sh.tokens += n;
    sh.max_ctx = std::max(sh.max_ctx, end);
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
  }
  boff[sh.seqs] = nb;
  sh.upload_bytes = off_blocks_ + sizeof(int32_t) * static_cast<size_t>(nb);
  return sh;
}

void step_meta_buffer::upload(const step_shape& shape, cudaStream_t stream) const {
  CUDA_CHECK(cudaMemcpyAsync(dev_, host_, shape.upload_bytes, cudaMemcpyHostToDevice, stream));
}

} // namespace conveyor::gpu
