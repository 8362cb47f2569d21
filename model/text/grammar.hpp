// Structured outputs: grammars compiled by XGrammar against the model's vocabulary, and the
// per-job constraint (a grammar matcher) the engine masks and advances. One compiler per server:
// compiling is cached by the grammar's text (an LRU bounded in bytes), so 200 jobs with 5
// schemas compile 5 times. Compiling may take milliseconds: it runs on the request actor's
// worker thread, never on the scheduler's.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/constraint.hpp"
#include "model/text/tokenizer.hpp"

namespace conveyor::model {

/// A schema, regex or grammar that does not compile. what() is the compiler's message.
struct grammar_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class grammar_kind {
  json_object,  ///< any JSON object (`spec` unused)
  json_schema,  ///< `spec`: a JSON schema's text
  regex,        ///< `spec`: a regular expression (the whole output matches it)
  ebnf,         ///< `spec`: an EBNF (GBNF) grammar whose start rule is `root` (gbnf_to_xgrammar first)
};

/// A GBNF grammar (llama.cpp's notation, empty alternatives allowed) in XGrammar's EBNF, which
/// spells the empty alternative `""`. Everything else is copied as it is (model/text/gbnf.cpp).
std::string gbnf_to_xgrammar(const std::string& gbnf);

class grammar_compiler {
public:
  /// Builds XGrammar's view of the vocabulary (token bytes; control tokens never allowed; the
  /// tokenizer's end-of-generation ids end a grammar). `vocab_size` is the logits' width (>= the
  /// tokenizer's). `cache_bytes` bounds the compiled-grammar cache.
  grammar_compiler(const tokenizer& tok, int32_t vocab_size, int64_t cache_bytes = 64ll << 20);
  ~grammar_compiler();
  grammar_compiler(const grammar_compiler&) = delete;
  grammar_compiler& operator=(const grammar_compiler&) = delete;

  /// A fresh constraint for one job. Throws grammar_error naming the problem. Thread-safe.
  std::shared_ptr<token_constraint> constrain(grammar_kind kind, const std::string& spec) const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace conveyor::model
