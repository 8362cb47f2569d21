#include "model/text/grammar.hpp"

#include <algorithm>

#include <xgrammar/xgrammar.h>

namespace conveyor::model {
namespace {

// One job's matcher: the bitmask XGrammar fills is the engine's (int32 words, bit t%32 of word t/32).
class xgrammar_constraint final : public token_constraint {
public:
  xgrammar_constraint(const xgrammar::CompiledGrammar& g, int32_t vocab_size) : m_(g), vocab_size_(vocab_size) {}

  void fill_mask(std::vector<uint32_t>& mask) override {
    const int32_t words = xgrammar::GetBitmaskSize(vocab_size_);
    mask.resize(static_cast<size_t>(words));
    int64_t shape[1] = {words};
    DLTensor t{};
    t.data = mask.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = xgrammar::GetBitmaskDLType();
    t.shape = shape;
    // Never throws into the executor's threads: a matcher that has ended (or fails) allows
    // nothing; the sampler then ignores the mask and accept() refuses the token, which ends the job.
    try {
      if (m_.IsTerminated()) std::fill(mask.begin(), mask.end(), 0u);
      else m_.FillNextTokenBitmask(&t, 0);
    } catch (const std::exception&) {
      std::fill(mask.begin(), mask.end(), 0u);
    }
  }
  bool accept(token_id token) override {
    try {
      return !m_.IsTerminated() && m_.AcceptToken(token);
    } catch (const std::exception&) {
      return false;
    }
  }
  bool terminated() const override { return m_.IsTerminated(); }
  void rollback(int32_t n) override {
    if (n > 0) m_.Rollback(n);  // unbounded in this XGrammar (max_rollback_tokens is unused)
  }

private:
  xgrammar::GrammarMatcher m_;
  int32_t vocab_size_;
};

// XGrammar prefixes its messages with "[time] file:line: "; users get the message itself.
std::string bare(const std::runtime_error& e) { return e.std::runtime_error::what(); }

} // namespace

struct grammar_compiler::impl {
  int32_t vocab_size;
  std::unique_ptr<xgrammar::GrammarCompiler> compiler;
};

grammar_compiler::grammar_compiler(const tokenizer& tok, int32_t vocab_size, int64_t cache_bytes) : p_(std::make_unique<impl>()) {
  // Token bytes as they are (RAW); a control token's piece is "", which XGrammar never allows.
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  for (int32_t i = 0; i < tok.vocab_size(); ++i) vocab[static_cast<size_t>(i)] = tok.piece(i, /*special=*/false);
  const std::vector<int32_t> stops(tok.eog_ids().begin(), tok.eog_ids().end());
  p_->vocab_size = std::max(vocab_size, tok.vocab_size());
  xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, p_->vocab_size, stops, false);
  p_->compiler = std::make_unique<xgrammar::GrammarCompiler>(info, /*max_threads=*/1, /*cache_enabled=*/true, cache_bytes);
}

grammar_compiler::~grammar_compiler() = default;

std::shared_ptr<token_constraint> grammar_compiler::constrain(grammar_kind kind, const std::string& spec) const {
  try {
    xgrammar::CompiledGrammar g = [&] {
      switch (kind) {
        case grammar_kind::json_object: return p_->compiler->CompileJSONSchema(R"({"type":"object"})", /*any_whitespace=*/false);
        // Compact separators and bounded whitespace: a sampled model cannot wander off into
        // endless blank space inside the object.
        case grammar_kind::json_schema: return p_->compiler->CompileJSONSchema(spec, /*any_whitespace=*/false);
        case grammar_kind::regex: return p_->compiler->CompileRegex(spec);
        case grammar_kind::ebnf: return p_->compiler->CompileGrammar(gbnf_to_xgrammar(spec), "root");
      }
      throw grammar_error("unknown grammar kind");
    }();
    return std::make_shared<xgrammar_constraint>(g, p_->vocab_size);
  } catch (const grammar_error&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw grammar_error(bare(e));
  }
}

} // namespace conveyor::model
