// Pre-tokenizers for byte-level BPE: the tokenizer.ggml.pre names we support, their flags, and
// the regex split (llama.cpp unicode_regex_split semantics) compiled once with PCRE2 (UTF + UCP,
// JIT when available). Internal to model/: the public API is model/text/tokenizer.hpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::model {

/// The regex families llama.cpp uses for the pre types we support; `none` splits nothing
/// (SentencePiece vocabularies have no pre-tokenizer).
enum class pre_kind { smollm, llama3, qwen2, gpt2, default_bpe, none };

/// What a tokenizer.ggml.pre value implies (llama.cpp llama_vocab::impl::load).
struct pre_config {
  pre_kind kind = pre_kind::default_bpe;
  bool ignore_merges = false;  ///< a pre-token that is itself a vocab entry skips BPE
  bool clean_spaces = true;    ///< detokenize drops " ." " ," " !" " ?" and some " '" forms
  bool add_bos = false;        ///< default for add_bos when the file does not say
};

/// nullopt for a name we do not support.
std::optional<pre_config> find_pre(std::string_view name);
/// Comma-separated list of supported names, for error messages.
std::string supported_pre_names();

/// Splits text into pre-tokens. Immutable after construction; split() is safe to call from
/// several threads at once.
class pretokenizer {
public:
  /// Compiles the regexes of `kind`. Throws tokenizer_error if PCRE2 rejects one.
  explicit pretokenizer(pre_kind kind);
  pretokenizer(pretokenizer&&) noexcept;
  ~pretokenizer();

  /// Appends the pieces of `text` (valid UTF-8) to `out` as views into `text`. Each regex is
  /// applied in turn to every current piece; matches and the spans between them both become
  /// pieces, so the pieces always tile `text` exactly. Empty text gives no piece.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

private:
  struct regex;
  std::vector<std::unique_ptr<regex>> regexes_;
};

} // namespace conveyor::model
