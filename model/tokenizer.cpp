// Tokenizer construction: validates a vocab_data (model type, pre type, token types, special ids,
// merges), builds the BPE indexes, the per-id piece cache and the special/EOG id lists; reads the
// vocab from GGUF metadata. Encoding lives in tokenizer_encode.cpp, decoding in detokenize.cpp.
#include <algorithm>
#include <cstdio>

#include "model/gguf.hpp"
#include "model/tokenizer_impl.hpp"
#include "model/unicode_bytes.hpp"

namespace conveyor::model {
namespace {

pre_config checked_pre(const vocab_data& v) {
  if (v.model != "gpt2") {
    throw tokenizer_error("tokenizer.ggml.model '" + v.model +
                          "' is not supported (supported: gpt2, byte-level BPE)");
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
    : vocab(named_tokens(std::move(v))), pre(checked_pre(vocab)), pretok(pre.kind), bpe(vocab.tokens, vocab.merges) {
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
  if (vocab.add_bos && vocab.bos < 0) throw tokenizer_error("add_bos_token is set but there is no bos_token_id");
  if (vocab.add_eos && vocab.eos < 0) throw tokenizer_error("add_eos_token is set but there is no eos_token_id");

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
    const std::string& text = vocab.tokens[i];
    switch (kinds[i]) {
    case token_kind::normal: pieces[i] = decode_token_text(text); break;
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

  if (vocab.eos >= 0) eog.push_back(vocab.eos);
  for (const char* text : {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>"}) {
    if (const token_id id = bpe.find(text); id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
}

tokenizer::tokenizer(vocab_data v) : p_(std::make_unique<impl>(std::move(v))) {}
tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer::~tokenizer() = default;

tokenizer tokenizer::from_gguf(const gguf_file& f) {
  try {
    vocab_data v;
    const auto model = f.get_string("tokenizer.ggml.model");
    if (!model) throw tokenizer_error("tokenizer.ggml.model is missing");
    v.model = *model;
    v.pre = f.get_string("tokenizer.ggml.pre").value_or("default");
    v.tokens = f.get_string_array("tokenizer.ggml.tokens");
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.token_types.push_back(int32_t(t));
    v.merges = f.get_string_array("tokenizer.ggml.merges");
    auto id_of = [&](const char* key) -> token_id {
      const auto id = f.get_int(key);
      if (!id) return -1;
      if (*id < 0 || *id >= int64_t(v.tokens.size())) {
        throw tokenizer_error(std::string(key) + " " + std::to_string(*id) + " is out of range (vocabulary has " +
                              std::to_string(v.tokens.size()) + " tokens)");
      }
      return token_id(*id);
    };
    v.bos = id_of("tokenizer.ggml.bos_token_id");
    v.eos = id_of("tokenizer.ggml.eos_token_id");
    v.unk = id_of("tokenizer.ggml.unknown_token_id");
    v.pad = id_of("tokenizer.ggml.padding_token_id");
    // Absent add_bos_token: the pre type's default (true for llama3), as llama.cpp does.
    const auto pre = find_pre(v.pre);
    v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(pre && pre->add_bos);
    v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
    v.chat_template = f.get_string("tokenizer.chat_template").value_or("");
    return tokenizer(std::move(v));
  } catch (const tokenizer_error& e) {
    throw tokenizer_error(f.path() + ": " + e.what());
  } catch (const gguf_error& e) {
    throw tokenizer_error(e.what());  // already "<path>: <problem>"
  }
}

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
