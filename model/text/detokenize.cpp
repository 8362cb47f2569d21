// Ids -> text: piece() per token (control/unknown hidden unless `special`), decode() with
// llama.cpp's leading-space removal (add_space_prefix: one space off the first token's piece)
// and clean_spaces passes for the pre types that enable them, and stream_decoder, which
// holds back only a trailing sequence that is still a valid, incomplete UTF-8 prefix. Invalid
// bytes are passed through as they are, so the deltas always concatenate to decode(ids).
#include "model/text/tokenizer_impl.hpp"
#include "model/text/unicode_bytes.hpp"

namespace conveyor::model {
namespace {

/// llama.cpp llama_vocab::impl::detokenize clean_spaces, three in-place passes: drop the space in
/// " ?", " !", " .", " ,"; turn " ' " into "'"; drop the space before "'s", "'m", "'re", "'ve".
/// NOTE: pass 2 overwrites the skipped space with '\0' and later reads see it; kept for parity.
void clean_spaces(std::string& s) {
  size_t n = s.size(), total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    s[total++] = x;
  }
  s.resize(total);
  n = s.size(), total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = s[i];
    if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
      --total;
      s[++i] = '\0';
    }
    s[total++] = x;
  }
  s.resize(total);
  n = s.size(), total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = s[i];
    if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = s[i + 1];
      const bool two = i + 2 < n;
      if (x1 == 's' || x1 == 'm' || (two && ((x1 == 'r' && s[i + 2] == 'e') || (x1 == 'v' && s[i + 2] == 'e')))) {
        --total;
      }
    }
    s[total++] = x;
  }
  s.resize(total);
}

} // namespace

std::string tokenizer::piece(token_id id, bool special) const {
  const token_kind k = kind(id);  // throws std::out_of_range for a bad id
  if (!special && (k == token_kind::control || k == token_kind::unknown)) return {};
  return p_->pieces[id];
}

std::string tokenizer::decode(std::span<const token_id> ids, bool special) const {
  std::string out;
  bool first = true;
  for (token_id id : ids) {
    const token_kind k = kind(id);
    const bool strip = first && p_->vocab.add_space_prefix;  // llama_detokenize: lstrip on token 0 only
    first = false;
    if (!special && (k == token_kind::control || k == token_kind::unknown)) continue;
    const std::string& piece = p_->pieces[id];
    out.append(piece, strip && !piece.empty() && piece[0] == ' ' ? 1 : 0);
  }
  if (p_->pre.clean_spaces) clean_spaces(out);
  return out;
}

std::string stream_decoder::push(token_id id) {
  pending_ += tok_->piece(id);
  const size_t n = utf8_complete_prefix(pending_);
  std::string ready = pending_.substr(0, n);
  pending_.erase(0, n);
  return ready;
}

std::string stream_decoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

} // namespace conveyor::model
