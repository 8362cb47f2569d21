// The BPE merge loop over one pre-token. Symbols start as single bytes (their byte-encoded
// characters); a min-heap ordered by (rank, left position) picks the next merge, and entries
// whose sides have changed since they were pushed are skipped, like llama.cpp's work queue.
#include "model/text/bpe.hpp"

#include <algorithm>
#include <queue>

#include "model/text/tokenizer.hpp"
#include "model/text/unicode_bytes.hpp"

namespace conveyor::model {

bpe_model::bpe_model(const std::vector<std::string>& tokens, const std::vector<std::string>& merges) {
  token_to_id_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) token_to_id_.insert_or_assign(tokens[i], token_id(i));
  for (int b = 0; b < 256; ++b) byte_ids_[b] = find(byte_to_unicode(uint8_t(b)));

  merges_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos) {
      throw tokenizer_error("tokenizer.ggml.merges[" + std::to_string(i) + "] '" + m +
                            "' is not of the form \"left right\"");
    }
    const std::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
    joined.assign(left).append(right);
    const token_id l = find(left), r = find(right), j = find(joined);
    if (l < 0 || r < 0 || j < 0) {
      const std::string_view missing = l < 0 ? left : r < 0 ? right : std::string_view(joined);
      throw tokenizer_error("tokenizer.ggml.merges[" + std::to_string(i) + "] '" + m + "' refers to '" +
                            std::string(missing) + "', which is not in tokenizer.ggml.tokens");
    }
    merges_.try_emplace(pair_key(l, r), merge_rule{int32_t(i), j});
  }
}

token_id bpe_model::find(std::string_view text) const {
  const auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? -1 : it->second;
}

void bpe_model::encode_word(std::string_view raw, bool ignore_merges, std::vector<token_id>& out) const {
  if (raw.empty()) return;
  if (ignore_merges) {
    std::string enc;
    append_byte_encoded(enc, raw);
    if (const token_id id = find(enc); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const int n = int(raw.size());
  if (n == 1) {
    // One byte: no merge possible; fall back below when its character is not a token.
    if (const token_id id = byte_ids_[uint8_t(raw[0])]; id >= 0) {
      out.push_back(id);
      return;
    }
  }

  // Doubly linked list of symbols over the bytes; a merged-away symbol has id -2.
  struct symbol {
    token_id id;
    int prev, next, first, last;  // first/last: byte range [first, last) for the fallback
  };
  std::vector<symbol> sym(n);
  for (int i = 0; i < n; ++i) sym[i] = {byte_ids_[uint8_t(raw[i])], i - 1, i + 1 < n ? i + 1 : -1, i, i + 1};

  struct entry {
    int32_t rank;
    int left;
    token_id lid, rid, merged;
    bool operator>(const entry& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap;
  auto push_pair = [&](int l) {
    if (l < 0) return;
    const int r = sym[l].next;
    if (r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
    const auto it = merges_.find(pair_key(sym[l].id, sym[r].id));
    if (it != merges_.end()) heap.push({it->second.rank, l, sym[l].id, sym[r].id, it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    const entry e = heap.top();
    heap.pop();
    symbol& l = sym[e.left];
    if (l.id != e.lid || l.next < 0) continue;  // left merged away or grown since the push
    symbol& r = sym[l.next];
    if (r.id != e.rid) continue;  // right grown since the push
    l.id = e.merged;
    l.last = r.last;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = e.left;
    r.id = -2;
    push_pair(l.prev);
    push_pair(e.left);
  }

  for (int i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out.push_back(sym[i].id);
      continue;
    }
    // Not a token: try each byte of the symbol's byte-encoded text as a one-byte token.
    std::string enc;
    append_byte_encoded(enc, raw.substr(sym[i].first, sym[i].last - sym[i].first));
    for (char c : enc) {
      if (const token_id id = find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
  }
}

} // namespace conveyor::model
