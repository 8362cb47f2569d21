// Text -> ids: special-token partition (llama.cpp tokenizer_st_partition: each special text,
// longest first, is cut out of every remaining raw fragment), then per raw fragment either the
// UTF-8 repair, the regex pre-tokenizer and BPE, or (SentencePiece) the space prefix after a
// special token or at the start, spaces to U+2581 and the score merge; then BOS/EOS when requested.
#include <algorithm>

#include "model/text/tokenizer_impl.hpp"
#include "model/text/unicode_bytes.hpp"

namespace conveyor::model {
namespace {

struct fragment {
  token_id id;  ///< -1 for raw text
  size_t off, len;
};

/// Cuts every occurrence of the special tokens out of `text`. Without parse_special only
/// user-defined tokens are recognised (control and unknown texts stay plain text).
std::vector<fragment> partition(std::span<const token_id> specials, std::span<const token_kind> kinds,
                                std::span<const std::string> tokens, std::string_view text, bool parse_special) {
  std::vector<fragment> frags{{-1, 0, text.size()}}, next;
  if (text.empty()) return frags;
  for (token_id id : specials) {
    if (!parse_special && kinds[id] != token_kind::user_defined) continue;
    const std::string& s = tokens[id];
    if (text.find(s) == std::string_view::npos) continue;  // nowhere in the text: no fragment has it
    next.clear();
    for (const fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.off, f.len);
      size_t pos = 0;
      for (size_t hit; (hit = raw.find(s, pos)) != std::string_view::npos; pos = hit + s.size()) {
        if (hit > pos) next.push_back({-1, f.off + pos, hit - pos});
        next.push_back({id, f.off + hit, s.size()});
      }
      if (pos < raw.size()) next.push_back({-1, f.off + pos, raw.size() - pos});
    }
    frags.swap(next);
  }
  return frags;
}

/// llama.cpp's SentencePiece fragment: " " first when add_space_prefix and the fragment starts
/// the text or follows a special token, then every ' ' as U+2581.
std::string spm_escaped(std::string_view raw, bool prefix_space) {
  std::string text;
  text.reserve(raw.size() + raw.size() / 4 + 3);
  if (prefix_space) text += "\xE2\x96\x81";
  for (char c : raw) {
    if (c == ' ') text += "\xE2\x96\x81";
    else text += c;
  }
  return text;
}

} // namespace

std::vector<token_id> tokenizer::encode(std::string_view text, bool parse_special, bool add_special) const {
  const impl& t = *p_;
  std::vector<token_id> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && t.vocab.add_bos) out.push_back(t.vocab.bos);

  std::vector<std::string_view> words;
  std::string repaired;
  bool after_special = true;  // SentencePiece: the text start counts as "after a special token"
  for (const fragment& f : partition(t.specials, t.kinds, t.vocab.tokens, text, parse_special)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
      continue;
    }
    if (f.len == 0) continue;  // only an empty text gives one; llama.cpp has no fragment then
    std::string_view raw = text.substr(f.off, f.len);
    if (t.spm) {
      t.spm->encode(spm_escaped(raw, t.vocab.add_space_prefix && after_special), out);
      after_special = false;
      continue;
    }
    if (!is_valid_utf8(raw)) {  // llama.cpp reads each invalid byte as U+FFFD
      repaired = sanitize_utf8(raw);
      raw = repaired;
    }
    words.clear();
    t.pretok.split(raw, words);
    for (std::string_view w : words) t.bpe->encode_word(w, t.pre.ignore_merges, out);
  }

  if (add_special && t.vocab.add_eos) out.push_back(t.vocab.eos);
  return out;
}

} // namespace conveyor::model
