// chat_template on llama.cpp's Jinja engine. What a render passes mirrors llama.cpp's
// common/chat.cpp (common_chat_templates_apply_jinja and common_chat_template_direct_apply):
// messages (developer -> system; a first system message merged into the next when the template
// has no system role; content as [{type: text}] when it only takes typed content), bos_token,
// eos_token, enable_thinking, datetime, date_string, add_generation_prompt only when true, then
// the request's chat_template_kwargs over them; the engine's own builtins (raise_exception,
// strftime_now, namespace, ...). No tools.
// NOTE: the compiled program is immutable (execute is const, nodes build fresh values); each
// render gets its own jinja::context, so renders share nothing mutable.
#include "model/text/chat_template.hpp"

#include <chrono>

#include "llama-jinja/jinja/caps.h"
#include "llama-jinja/jinja/lexer.h"
#include "llama-jinja/jinja/parser.h"
#include "llama-jinja/jinja/runtime.h"
#include "llama-jinja/jinja/value.h"
#include "llama-jinja/json.h"
#include "model/text/tokenizer.hpp"

namespace conveyor::model {
namespace {

// llama.cpp's CHATML_TEMPLATE_SRC (common/chat.cpp), for models without a template.
constexpr const char* chatml_source =
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}";

/// The engine's multi-line message on one line, without the caret line under its excerpt.
std::string one_line(const std::string& s) {
  std::string out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    const std::string line = s.substr(start, end - start);
    const bool caret = line.find_first_not_of(" ^") == std::string::npos;
    if (!line.empty() && !caret) out += (out.empty() ? "" : " ") + line;
    start = end + 1;
  }
  return out;
}

/// The engine wraps errors with a source excerpt ("While executing ... Error: <why>"); a
/// raise_exception's <why> is "Jinja Exception: <the template's message>". Keep the message.
std::string render_error_text(const std::string& what) {
  const std::string raised = "Jinja Exception: ";
  if (auto at = what.rfind(raised); at != std::string::npos) return one_line(what.substr(at + raised.size()));
  const std::string error = "Error: ";
  if (auto at = what.rfind(error); at != std::string::npos) return one_line(what.substr(at + error.size()));
  return one_line(what);
}

std::string format_local(std::time_t t, const char* fmt) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[128];
  const size_t n = std::strftime(buf, sizeof buf, fmt, &tm);
  return std::string(buf, n);
}

bool starts_with(const std::string& s, const std::string& p) { return !p.empty() && s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

} // namespace

struct chat_template::impl {
  jinja::program prog;
  std::string source;  // as the lexer returned it (for the engine's error excerpts)
  special_tokens tokens;
  jinja::caps caps;
  bool chatml_default = false;
  bool maps_developer = true;  // every template but GPT-OSS's reads developer as system
  bool enable_thinking = false;

  common_json messages_json(std::span<const chat_message> in) const;
  std::string run(std::span<const chat_message> messages, bool add_generation_prompt, std::time_t now,
                  const template_kwargs& kwargs = {}) const;
};

common_json chat_template::impl::messages_json(std::span<const chat_message> in) const {
  std::vector<chat_message> msgs(in.begin(), in.end());
  if (maps_developer)
    for (chat_message& m : msgs)
      if (m.role == "developer") m.role = "system";
  if (!caps.supports_system_role && !msgs.empty() && msgs.front().role == "system") {
    if (msgs.size() > 1) msgs[1].content = msgs.front().content + "\n" + msgs[1].content;
    msgs.erase(msgs.begin());
  }
  const bool only_typed = !caps.supports_string_content && caps.supports_typed_content;
  common_json out = common_json::array();
  for (const chat_message& m : msgs) {
    common_json j = common_json::object();
    j["role"] = m.role;
    if (only_typed) {
      common_json part = common_json::object();
      part["type"] = "text";
      part["text"] = m.content;
      common_json parts = common_json::array();
      parts.push_back(part);
      j["content"] = parts;
    } else {
      j["content"] = m.content;
    }
    out.push_back(j);
  }
  return out;
}

std::string chat_template::impl::run(std::span<const chat_message> messages, bool add_generation_prompt,
                                     std::time_t now, const template_kwargs& kwargs) const {
  jinja::context ctx(source);
  ctx.current_time = now;
  common_json inp = common_json::object();
  inp["messages"] = messages_json(messages);
  inp["bos_token"] = tokens.bos;
  inp["eos_token"] = tokens.eos;
  inp["enable_thinking"] = enable_thinking;
  inp["datetime"] = format_local(now, "%b %d %Y");
  inp["date_string"] = format_local(now, "%d %b %Y");
  if (add_generation_prompt) inp["add_generation_prompt"] = true;
  for (const auto& [key, value] : kwargs)  // the request's own (llama-server's chat_template_kwargs)
    std::visit([&inp, &key](const auto& v) { inp[key] = v; }, value);
  jinja::global_from_json(ctx, inp, /*mark_input=*/true);
  // The builtin strftime_now calls std::localtime (a shared buffer): renders run concurrently.
  ctx.set_val("strftime_now", jinja::mk_val<jinja::value_func>("strftime_now", [](const jinja::func_args& args) -> jinja::value {
    args.ensure_vals<jinja::value_string>();
    const std::string fmt = args.get_pos(0)->as_string().str();
    std::string out = format_local(args.ctx.current_time, fmt.c_str());
    if (out.empty() && !fmt.empty()) throw jinja::raised_exception("strftime_now: failed to format time");
    return jinja::mk_val<jinja::value_string>(out);
  }));
  jinja::runtime rt(ctx);
  std::string result = jinja::runtime::gather_string_parts(rt.execute(prog))->as_string().str();
  if (tokens.add_bos && starts_with(result, tokens.bos)) result.erase(0, tokens.bos.size());
  if (tokens.add_eos && ends_with(result, tokens.eos)) result.resize(result.size() - tokens.eos.size());
  return result;
}

chat_template::chat_template(const std::string& source, special_tokens tokens) : p_(std::make_unique<impl>()) {
  p_->chatml_default = source.empty() || source == "chatml";
  p_->tokens = std::move(tokens);
  try {
    jinja::lexer lexer;
    auto lexed = lexer.tokenize(p_->chatml_default ? std::string(chatml_source) : source);
    p_->prog = jinja::parse_from_tokens(lexed);
    p_->source = std::move(lexed.source);
    p_->caps = jinja::caps_get(p_->prog);
  } catch (const std::exception& e) {
    throw chat_template_error("chat template does not parse: " + one_line(e.what()));
  }
  p_->maps_developer = p_->source.find("<|channel|>") == std::string::npos;
  // llama-server turns thinking on when the template's generation prompt depends on it (Qwen3).
  try {
    const chat_message probe[] = {{"user", "test"}};
    p_->enable_thinking = true;
    const std::string on = p_->run(probe, true, 0);
    p_->enable_thinking = false;
    p_->enable_thinking = on != p_->run(probe, true, 0);
  } catch (const std::exception&) {
    p_->enable_thinking = false;  // a template that refuses the probe refuses it either way
  }
}

chat_template chat_template::for_model(const tokenizer& tok) { return chat_template(tok.chat_template(), tokens_of(tok)); }

chat_template::special_tokens chat_template::tokens_of(const tokenizer& tok) {
  special_tokens t;
  if (tok.bos() >= 0) t.bos = tok.piece(tok.bos(), /*special=*/true);
  if (tok.eos() >= 0) t.eos = tok.piece(tok.eos(), /*special=*/true);
  // What encode(add_special) adds around an empty text tells whether the vocab adds BOS / EOS.
  const std::vector<token_id> around = tok.encode("", /*parse_special=*/false, /*add_special=*/true);
  t.add_bos = !around.empty() && around.front() == tok.bos();
  t.add_eos = !around.empty() && around.back() == tok.eos() && (around.size() > 1 || !t.add_bos);
  return t;
}

chat_template::chat_template(chat_template&&) noexcept = default;
chat_template& chat_template::operator=(chat_template&&) noexcept = default;
chat_template::~chat_template() = default;

std::string chat_template::render(std::span<const chat_message> messages, bool add_generation_prompt) const {
  return render(messages, add_generation_prompt, std::time(nullptr));
}

std::string chat_template::render(std::span<const chat_message> messages, bool add_generation_prompt,
                                  std::time_t now, const template_kwargs& kwargs) const {
  try {
    return p_->run(messages, add_generation_prompt, now, kwargs);
  } catch (const std::exception& e) {
    throw chat_template_error("chat template: " + render_error_text(e.what()));
  }
}

bool chat_template::is_chatml_default() const { return p_->chatml_default; }

} // namespace conveyor::model
