// The SentencePiece merge loop over one text fragment (llama.cpp llm_tokenizer_spm_session):
// a max-heap of adjacent pairs ordered by (score desc, left position asc); an entry is stale
// when either side has been merged since it was pushed, which the lengths reveal. A merge only
// ever forms a vocabulary entry, so each final symbol is a token or one unmerged character,
// and llama.cpp's rev_merge re-segmentation never applies to the latter: bytes it is.
#include "model/text/spm.hpp"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "model/text/tokenizer.hpp"

namespace conveyor::model {
namespace {

/// llama.cpp unicode_len_utf8: the length a lead byte announces (1 for a continuation byte).
size_t utf8_len(unsigned char lead) {
  static constexpr size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[lead >> 4];
}

} // namespace

spm_model::spm_model(const std::vector<std::string>& tokens, const std::vector<float>& scores, token_id unk)
    : scores_(scores) {
  if (!scores_.empty() && scores_.size() != tokens.size()) {
    throw tokenizer_error("tokenizer.ggml.scores has " + std::to_string(scores_.size()) +
                          " entries but tokenizer.ggml.tokens has " + std::to_string(tokens.size()));
  }
  if (scores_.empty()) scores_.assign(tokens.size(), 0.0f);
  token_to_id_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) token_to_id_.insert_or_assign(tokens[i], token_id(i));
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    token_id id = find(hex);
    if (id < 0) id = find(std::string(1, char(b)));
    byte_ids_[b] = id >= 0 ? id : unk;
  }
}

token_id spm_model::find(std::string_view text) const {
  const auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

void spm_model::encode(std::string_view text, std::vector<token_id>& out) const {
  if (text.empty()) return;
  struct symbol {
    int prev, next;
    size_t off, len;  // len 0: merged into its left neighbour
  };
  std::vector<symbol> sym;
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const int i = int(sym.size());
    sym.push_back({i - 1, off + len == text.size() ? -1 : i + 1, off, len});
    off += len;
  }

  struct bigram {
    float score;
    int left, right;
    size_t len;
    bool operator<(const bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<bigram> heap;
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const size_t len = sym[l].len + sym[r].len;
    const token_id id = find(text.substr(sym[l].off, len));
    if (id >= 0) heap.push({scores_[id], l, r, len});
  };
  for (int i = 1; i < int(sym.size()); ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    const bigram b = heap.top();
    heap.pop();
    symbol& l = sym[b.left];
    symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // a side changed since the push
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }

  for (int i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].off, sym[i].len);
    if (const token_id id = find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char c : piece) {
      if (byte_ids_[c] >= 0) out.push_back(byte_ids_[c]);
    }
  }
}

} // namespace conveyor::model
