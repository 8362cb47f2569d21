// Tokenizers built from GGUF metadata: byte-level BPE (tokenizer.ggml.model = "gpt2") with the
// pre-tokenizers smollm, llama3 (llama-bpe), qwen2 and gpt2 (model-format.md §5), and SentencePiece
// ("llama": Llama 2, Mistral 7B), as llama.cpp runs them; special tokens, end-of-generation ids
// and streaming detokenization.
#pragma once

#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/types.hpp"

namespace conveyor::model {

class gguf_file;

/// An unsupported or inconsistent tokenizer. what() names the file or key and the problem.
struct tokenizer_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Token kinds as in tokenizer.ggml.token_type.
enum class token_kind : int32_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

/// The raw vocabulary as stored in GGUF metadata.
struct vocab_data {
  std::string model = "gpt2";   ///< tokenizer.ggml.model: "gpt2" (BPE) or "llama" (SentencePiece)
  std::string pre = "default";  ///< tokenizer.ggml.pre (BPE only; SentencePiece ignores it)
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  ///< empty = all normal
  std::vector<std::string> merges;   ///< "left right" (BPE)
  std::vector<float> scores;         ///< tokenizer.ggml.scores (SentencePiece); empty = all 0
  token_id bos = -1, eos = -1, unk = -1, pad = -1;
  /// tokenizer.ggml.{eot,eom,fim_pre,fim_suf,fim_mid,fim_pad,fim_rep,fim_sep}_token_id;
  /// -1: found by text as llama.cpp does (see eog_ids()).
  token_id eot = -1, eom = -1, fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false, add_eos = false;
  /// tokenizer.ggml.add_space_prefix (from_gguf's default: true for SentencePiece, else false).
  /// SentencePiece encode puts a space before text at the start and after each special token;
  /// decode drops one leading space of the first token's piece.
  bool add_space_prefix = false;
  std::string chat_template;  ///< tokenizer.chat_template, may be empty
};

class tokenizer {
public:
  /// Throws tokenizer_error for an unsupported model/pre type or inconsistent data.
  explicit tokenizer(vocab_data v);
  /// Reads vocab_data from the file's metadata. Throws tokenizer_error naming the file.
  static tokenizer from_gguf(const gguf_file& f);
  tokenizer(tokenizer&&) noexcept;
  ~tokenizer();

  /// Text to ids. parse_special: control tokens written in the text become single ids.
  /// add_special: prepend BOS / append EOS when the vocabulary says so.
  /// BPE reads bytes that are not valid UTF-8 as U+FFFD, one per byte; SentencePiece encodes
  /// them with its byte tokens.
  /// Thread-safe: a tokenizer is immutable after construction.
  std::vector<token_id> encode(std::string_view text, bool parse_special, bool add_special = true) const;
  /// The bytes of one token (control tokens give "" unless `special`).
  /// Throws std::out_of_range for an id outside [0, vocab_size()), as do decode() and kind().
  std::string piece(token_id id, bool special = false) const;
  /// Ids to text, as llama_detokenize (remove_special = false) gives it: the pieces, with one
  /// leading space dropped when add_space_prefix, then clean_spaces for the pre types that want
  /// it. May contain broken UTF-8 at the end if the ids end mid-character.
  std::string decode(std::span<const token_id> ids, bool special = false) const;

  int32_t vocab_size() const;
  token_id bos() const;
  token_id eos() const;
  /// End-of-generation ids, sorted, by llama.cpp's rule (model/text/special_tokens.hpp): eos, eot,
  /// eom, the FIM pad/repo/file-separator tokens, and every token whose text is a known end text
  /// such as <|im_end|>, <|endoftext|>, <|eot_id|>, <|eom_id|>, <|end_of_text|>, </s>.
  const std::vector<token_id>& eog_ids() const;
  bool is_eog(token_id id) const;
  token_kind kind(token_id id) const;
  const std::string& chat_template() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

/// Turns a stream of ids into text deltas that never split a UTF-8 character. Only a trailing
/// sequence that is still a valid, incomplete UTF-8 prefix (at most 3 bytes) is held back; bytes
/// that cannot be part of a valid character are emitted as they are, at once. So the deltas plus
/// flush() always concatenate to the ids' pieces (special = false), which is decode(ids) for pre
/// types without clean_spaces, such as smollm and qwen2. With add_space_prefix (SentencePiece)
/// the first piece keeps its leading space, as llama.cpp's server streams it.
class stream_decoder {
public:
  explicit stream_decoder(const tokenizer& t) : tok_(&t) {}
  /// Appends one token; returns the text that became complete (possibly empty).
  std::string push(token_id id);
  /// Whatever is still held (an incomplete character at the end of the stream), as is.
  std::string flush();

private:
  const tokenizer* tok_;
  std::string pending_;
};

} // namespace conveyor::model
