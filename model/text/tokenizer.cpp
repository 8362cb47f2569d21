// Tokenizer construction: validates a vocab_data (model type, pre type, token types, special ids,
// merges, scores), builds the BPE or SentencePiece indexes, the per-id piece cache and the
// special/EOG id lists. Reading GGUF metadata lives in tokenizer_gguf.cpp, encoding in
// tokenizer_encode.cpp, decoding in detokenize.cpp.
#include <algorithm>
#include <cstdio>

#include "model/text/special_tokens.hpp"
#include "model/text/tokenizer_impl.hpp"
#include "model/text/unicode_bytes.hpp"

namespace conveyor::model {
namespace {

pre_config checked_pre(const vocab_data& v) {
  if (v.model == "llama") return {pre_kind::none, false, false, true};  // llama.cpp: SPM has no pre type
  if (v.model != "gpt2") {
    throw tokenizer_error("tokenizer.ggml.model '" + v.model +
                          "' is not supported (supported: gpt2 = byte-level BPE, llama = SentencePiece)");
  }
  const auto cfg = find_pre(v.pre);
  if (!cfg) {
    throw tokenizer_error("tokenizer.ggml.pre '" + v.pre + "' is not supported (supported: " +
                          supported_pre_names() + ")");
  }
  return *cfg;
}

/// llama.cpp renames an empty token text to "[EMPTY_<id>]" on load; so do we.
vocab_data named_tokens(vocab_data v) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i].empty()) v.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  return v;
}

void check_special_id(const char* name, token_id id, size_t n) {
  if (id < -1 || id >= token_id(n)) {
    throw tokenizer_error(std::string("tokenizer.ggml.") + name + "_token_id " + std::to_string(id) +
                          " is out of range (vocabulary has " + std::to_string(n) + " tokens)");
  }
}

/// llama_decode_text: each code point of the token text back to its byte. A code point that
/// stands for no byte gives "[UNK_BYTE_0x<utf8 hex>" + whole token text + "]", as llama.cpp does.
std::string decode_token_text(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cpt = next_codepoint(text, pos);
    if (cpt == invalid_codepoint) cpt = 0xFFFD;
    if (const int b = unicode_to_byte(cpt); b >= 0) {
      out += char(b);
      continue;
    }
    std::string utf8;
    append_utf8(utf8, cpt);
    out += "[UNK_BYTE_0x";
    for (unsigned char c : utf8) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", c);
      out += hex;
    }
    out.append(text).append("]");
  }
  return out;
}

std::string byte_token_piece(const std::string& text) {
  unsigned int b = 0;
  char tail = 0;
  if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2x%c", &b, &tail) == 2 && tail == '>') {
    return std::string(1, char(b));
  }
  return decode_token_text(text);
}

} // namespace

tokenizer::impl::impl(vocab_data v)
    : vocab(named_tokens(std::move(v))), pre(checked_pre(vocab)), pretok(pre.kind) {
  const size_t n = vocab.tokens.size();
  if (n == 0) throw tokenizer_error("tokenizer.ggml.tokens is empty");
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    throw tokenizer_error("tokenizer.ggml.token_type has " + std::to_string(vocab.token_types.size()) +
                          " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  check_special_id("bos", vocab.bos, n);
  check_special_id("eos", vocab.eos, n);
  check_special_id("unknown", vocab.unk, n);
  check_special_id("padding", vocab.pad, n);
  for (const auto& [name, id] : {std::pair{"eot", vocab.eot}, {"eom", vocab.eom}, {"fim_pre", vocab.fim_pre},
                                 {"fim_suf", vocab.fim_suf}, {"fim_mid", vocab.fim_mid}, {"fim_pad", vocab.fim_pad},
                                 {"fim_rep", vocab.fim_rep}, {"fim_sep", vocab.fim_sep}}) {
    check_special_id(name, id, n);
  }
  if (vocab.add_bos && vocab.bos < 0) throw tokenizer_error("add_bos_token is set but there is no bos_token_id");
  if (vocab.add_eos && vocab.eos < 0) throw tokenizer_error("add_eos_token is set but there is no eos_token_id");
  if (vocab.model == "llama") {
    if (vocab.scores.size() < n && !vocab.scores.empty()) {  // more is fine, as in llama.cpp
      throw tokenizer_error("tokenizer.ggml.scores has " + std::to_string(vocab.scores.size()) +
                            " entries but tokenizer.ggml.tokens has " + std::to_string(n));
    }
    vocab.scores.resize(vocab.scores.empty() ? 0 : n);
    spm.emplace(vocab.tokens, vocab.scores, vocab.unk);
  } else {
    bpe.emplace(vocab.tokens, vocab.merges);
  }

  kinds.assign(n, token_kind::normal);
  pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!vocab.token_types.empty()) {
      const int32_t t = vocab.token_types[i];
      if (t < int32_t(token_kind::normal) || t > int32_t(token_kind::byte)) {
        throw tokenizer_error("tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string(t) +
                              " is not a token type (1..6)");
      }
      kinds[i] = token_kind(t);
    }
  }
  eog = find_eog_ids(vocab, kinds);  // may turn end/FIM texts into control tokens first
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = vocab.tokens[i];
    switch (kinds[i]) {
    case token_kind::normal: pieces[i] = spm ? spm_unescape_spaces(text) : decode_token_text(text); break;
    case token_kind::byte: pieces[i] = byte_token_piece(text); break;
    case token_kind::unknown:
    case token_kind::control:
    case token_kind::user_defined: pieces[i] = text; break;
    case token_kind::unused: break;
    }
    const bool special = kinds[i] == token_kind::control || kinds[i] == token_kind::user_defined ||
                         kinds[i] == token_kind::unknown;
    if (special && !text.empty()) specials.push_back(token_id(i));
  }
  std::stable_sort(specials.begin(), specials.end(), [&](token_id a, token_id b) {
    return vocab.tokens[a].size() > vocab.tokens[b].size();
  });
}

tokenizer::tokenizer(vocab_data v) : p_(std::make_unique<impl>(std::move(v))) {}
tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer::~tokenizer() = default;

int32_t tokenizer::vocab_size() const { return int32_t(p_->vocab.tokens.size()); }
token_id tokenizer::bos() const { return p_->vocab.bos; }
token_id tokenizer::eos() const { return p_->vocab.eos; }
const std::vector<token_id>& tokenizer::eog_ids() const { return p_->eog; }
bool tokenizer::is_eog(token_id id) const { return std::binary_search(p_->eog.begin(), p_->eog.end(), id); }
const std::string& tokenizer::chat_template() const { return p_->vocab.chat_template; }

token_kind tokenizer::kind(token_id id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range("token id " + std::to_string(id) + " outside [0, " + std::to_string(vocab_size()) + ")");
  }
  return p_->kinds[id];
}

} // namespace conveyor::model
