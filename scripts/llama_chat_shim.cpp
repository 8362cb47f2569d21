// Link shim for llama.cpp's common/chat (built by scripts/build_jinja.sh into libllama-chat.a).
//
// conveyor uses llama.cpp's chat layer (templates with tools, the per-family tool-call parsers,
// the tool-call grammars) without llama.cpp's model library: the templates are given as text
// (common_chat_templates_init(nullptr, source, bos, eos)), so the few llama.cpp functions the
// chat sources reference for a loaded llama_model are never reached. They are defined here so
// the archive links; each one that must not run says so and aborts. common.cpp (which needs the
// model library) is not built either: the four string helpers the chat sources use are here.
// Logging: errors to stderr; warnings and below dropped (a model's unparsable output is a
// warning there, and conveyor answers it as content rather than logging each one).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common.h"
#include "log.h"

namespace {

[[noreturn]] void unreachable(const char* what) {
  std::fprintf(stderr, "conveyor: llama.cpp's %s was called, but conveyor links no llama.cpp model library "
                       "(scripts/llama_chat_shim.cpp); this is a bug in conveyor\n", what);
  std::abort();
}

} // namespace

// ---- log.h: errors to stderr, the rest dropped -------------------------------------------------
int common_log_get_verbosity_thold(void) { return LOG_LEVEL_ERROR; }

struct common_log* common_log_main() { return nullptr; }

void common_log_add(struct common_log*, enum ggml_log_level level, const char* fmt, ...) {
  if (level != GGML_LOG_LEVEL_ERROR) return;
  std::fputs("llama.cpp chat: ", stderr);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
}

// ---- ggml.h: GGML_ASSERT / GGML_ABORT -------------------------------------------------------
void ggml_abort(const char* file, int line, const char* fmt, ...) {
  std::fprintf(stderr, "%s:%d: ", file, line);
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::abort();
}

// ---- llama.h / common.h: a loaded model's vocabulary and template (never reached) ------------
const struct llama_vocab* llama_model_get_vocab(const struct llama_model*) { unreachable("llama_model_get_vocab"); }
const char* llama_model_chat_template(const struct llama_model*, const char*) { unreachable("llama_model_chat_template"); }
llama_token llama_vocab_bos(const struct llama_vocab*) { unreachable("llama_vocab_bos"); }
llama_token llama_vocab_eos(const struct llama_vocab*) { unreachable("llama_vocab_eos"); }
bool llama_vocab_get_add_bos(const struct llama_vocab*) { unreachable("llama_vocab_get_add_bos"); }
bool llama_vocab_get_add_eos(const struct llama_vocab*) { unreachable("llama_vocab_get_add_eos"); }

// The built-in (non-Jinja) templates: conveyor always renders with Jinja. -1 is llama.cpp's own
// answer for a template it does not know.
int32_t llama_chat_apply_template(const char*, const struct llama_chat_message*, size_t, bool, char*, int32_t) { return -1; }

std::vector<llama_token> common_tokenize(const struct llama_vocab*, const std::string&, bool, bool) {
  unreachable("common_tokenize");
}
std::string common_token_to_piece(const struct llama_vocab*, llama_token, bool) { unreachable("common_token_to_piece"); }

// ---- common.h: the string helpers the chat sources use (common.cpp is not built) ------------
void string_replace_all(std::string& s, const std::string& search, const std::string& replace) {
  if (search.empty()) return;
  std::string out;
  size_t from = 0;
  for (size_t at; (at = s.find(search, from)) != std::string::npos; from = at + search.size()) out.append(s, from, at - from).append(replace);
  s = out.append(s, from, std::string::npos);
}

std::string string_join(const std::vector<std::string>& values, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out.append(i ? separator : std::string()).append(values[i]);
  return out;
}

std::vector<std::string> string_split(const std::string& str, const std::string& delimiter) {
  if (delimiter.empty()) return {str};
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t at; (at = str.find(delimiter, from)) != std::string::npos; from = at + delimiter.size()) parts.push_back(str.substr(from, at - from));
  parts.push_back(str.substr(from));
  return parts;
}

std::string string_repeat(const std::string& str, size_t n) {
  std::string out;
  out.reserve(str.size() * n);
  while (n-- > 0) out += str;
  return out;
}
