// Regex pre-tokenization with PCRE2, following llama.cpp unicode_regex_split: the regexes of a
// pre type run in sequence, each one re-splitting every piece the previous one produced, and the
// text between matches is kept as its own piece. A regex only sees its piece (lookahead stops at
// the piece end), exactly as llama.cpp's per-offset matching does.
#include "model/text/pretokenize.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "model/text/tokenizer.hpp"

namespace conveyor::model {
namespace {

// llama.cpp's \s is the Unicode White_Space set (unicode_set_whitespace), which PCRE2's UCP \s
// lacks U+0085 from; we spell the set out so both agree on every code point.
constexpr std::string_view ws_set =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// The regexes, verbatim from llama.cpp's llm_tokenizer_bpe (ECMAScript syntax, which PCRE2 reads
// the same way for these constructs).
constexpr std::string_view re_gpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view re_llama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2's (Qwen2, Qwen2.5, Qwen3): llama3's with single digits, \p{N} instead of \p{N}{1,3}.
constexpr std::string_view re_qwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::vector<std::string_view> regexes_of(pre_kind kind) {
  switch (kind) {
  case pre_kind::smollm: return {"\\p{N}", re_gpt2};
  case pre_kind::llama3: return {re_llama3};
  case pre_kind::qwen2: return {re_qwen2};
  case pre_kind::gpt2: return {re_gpt2};
  case pre_kind::default_bpe: return {"[\\p{P}\\$\\+<=>\\^~\\|]+", re_gpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  case pre_kind::none: return {};
  }
  return {};
}

/// Rewrites \s and \S into explicit classes over ws_set (inside a class, \s adds the ranges).
std::string expand_whitespace(std::string_view pat) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pat.size(); ++i) {
    const char c = pat[i];
    if (c == '\\' && i + 1 < pat.size()) {
      const char e = pat[++i];
      if (e == 's') {
        out += in_class ? std::string(ws_set) : "[" + std::string(ws_set) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(ws_set) + "]";
      } else if (e == 'S') {
        throw tokenizer_error("pre-tokenizer regex: \\S inside a character class is not supported");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct pre_name {
  std::string_view name;
  pre_config cfg;
};

// llama.cpp's names and flags for the pre types that share our regex families.
constexpr pre_name pre_names[] = {
    {"smollm", {pre_kind::smollm, false, false, false}},
    {"starcoder", {pre_kind::smollm, false, true, false}},
    {"refact", {pre_kind::smollm, false, true, false}},
    {"command-r", {pre_kind::smollm, false, false, false}},
    {"codeshell", {pre_kind::smollm, false, true, false}},
    {"exaone", {pre_kind::smollm, false, true, false}},
    {"minerva-7b", {pre_kind::smollm, false, true, false}},
    {"minerva", {pre_kind::smollm, false, true, false}},
    {"llama3", {pre_kind::llama3, true, true, true}},
    {"llama-v3", {pre_kind::llama3, true, true, true}},
    {"llama-bpe", {pre_kind::llama3, true, true, true}},
    {"qwen2", {pre_kind::qwen2, false, false, false}},
    {"deepseek-r1-qwen", {pre_kind::qwen2, false, false, false}},
    {"gpt-2", {pre_kind::gpt2, false, true, false}},
    {"gpt2", {pre_kind::gpt2, false, true, false}},
    {"default", {pre_kind::default_bpe, false, true, false}},
    {"", {pre_kind::default_bpe, false, true, false}},
};

} // namespace

std::optional<pre_config> find_pre(std::string_view name) {
  for (const pre_name& p : pre_names) {
    if (p.name == name) return p.cfg;
  }
  return std::nullopt;
}

std::string supported_pre_names() {
  std::string out;
  for (const pre_name& p : pre_names) {
    if (p.name.empty()) continue;
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

struct pretokenizer::regex {
  pcre2_code* code = nullptr;
  ~regex() { pcre2_code_free(code); }
};

pretokenizer::pretokenizer(pre_kind kind) {
  for (std::string_view src : regexes_of(kind)) {
    const std::string pat = expand_whitespace(src);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto r = std::make_unique<regex>();
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (r->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw tokenizer_error("pre-tokenizer regex '" + std::string(src) + "' does not compile at offset " +
                            std::to_string(err_off) + ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    regexes_.push_back(std::move(r));
  }
}

pretokenizer::pretokenizer(pretokenizer&&) noexcept = default;
pretokenizer::~pretokenizer() = default;

void pretokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(pcre2_match_data_create(1, nullptr),
                                                                         &pcre2_match_data_free);
  if (!md) throw std::bad_alloc();
  std::vector<std::string_view> cur{text}, next;
  for (const auto& r : regexes_) {
    next.clear();
    for (std::string_view piece : cur) {
      const auto* subj = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t last = 0, start = 0;
      while (start < piece.size()) {
        const int rc = pcre2_match(r->code, subj, piece.size(), start, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw tokenizer_error(std::string("pre-tokenizer regex match failed: ") +
                                reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        if (ov[1] == ov[0]) {  // empty match (none of our regexes has one): step one character
          start = ov[0] + 1;
          while (start < piece.size() && (static_cast<unsigned char>(piece[start]) & 0xC0) == 0x80) ++start;
          continue;
        }
        if (ov[0] > last) next.push_back(piece.substr(last, ov[0] - last));
        next.push_back(piece.substr(ov[0], ov[1] - ov[0]));
        last = start = ov[1];
      }
      if (last < piece.size()) next.push_back(piece.substr(last));
    }
    cur.swap(next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

} // namespace conveyor::model
