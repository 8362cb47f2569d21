// ChatML rendering (model-format.md §5.7) without a Jinja engine. The only thing read from the
// GGUF template is the default system message some templates inject when the conversation does
// not start with one: we find that branch and take its string literal verbatim, so no model's
// sentence is hard-coded here. A branch we cannot read as plain literals injects nothing.
#include <optional>
#include <string>

#include "model/tokenizer.hpp"

namespace conveyor::model {
namespace {

void skip_space(std::string_view s, size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
}

/// Reads one Jinja string literal ('...' or "...", Python escapes) at `i`.
std::optional<std::string> read_literal(std::string_view s, size_t& i) {
  if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return std::nullopt;
  const char q = s[i++];
  std::string out;
  while (i < s.size() && s[i] != q) {
    char c = s[i++];
    if (c == '\\' && i < s.size()) {
      const char e = s[i++];
      switch (e) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case '\\': case '\'': case '"': c = e; break;
      default: out += '\\'; c = e; break;
      }
    }
    out += c;
  }
  if (i >= s.size()) return std::nullopt;
  ++i;  // closing quote
  return out;
}

/// The text of the first `{{ ... }}` at or after `from`, when it is literals joined by '+'.
std::optional<std::string> first_literal_output(std::string_view tpl, size_t from, size_t limit) {
  const size_t open = tpl.find("{{", from);
  if (open == std::string_view::npos || open >= limit) return std::nullopt;
  size_t i = open + 2;
  if (i < tpl.size() && tpl[i] == '-') ++i;
  std::string text;
  for (;;) {
    skip_space(tpl, i);
    auto lit = read_literal(tpl, i);
    if (!lit) return std::nullopt;
    text += *lit;
    skip_space(tpl, i);
    if (i < tpl.size() && tpl[i] == '+') {
      ++i;
      continue;
    }
    break;
  }
  if (tpl.compare(i, 2, "}}") == 0 || tpl.compare(i, 3, "-}}") == 0) return text;
  return std::nullopt;
}

/// End of the `{% ... %}` tag that contains position `pos`.
size_t tag_end(std::string_view tpl, size_t pos) {
  const size_t close = tpl.find("%}", pos);
  return close == std::string_view::npos ? tpl.size() : close + 2;
}

/// The default system message `tpl` injects before a conversation that lacks one, or nullopt.
/// Recognises `{% if ... messages[0]['role'] != 'system' %}{{ '<literal>' }}` (SmolLM2) and
/// `{% if messages[0]['role'] == 'system' %}...{% else %}{{ '<literal>' }}` (Qwen2 style).
std::optional<std::string> default_system(std::string_view tpl) {
  for (const char* q : {"'", "\""}) {
    const std::string role = std::string("messages[0][") + q + "role" + q + "]";
    for (size_t at = tpl.find(role); at != std::string_view::npos; at = tpl.find(role, at + 1)) {
      size_t i = at + role.size();
      skip_space(tpl, i);
      const bool ne = tpl.compare(i, 2, "!=") == 0;
      if (!ne && tpl.compare(i, 2, "==") != 0) continue;
      i += 2;
      skip_space(tpl, i);
      const auto sys = read_literal(tpl, i);
      if (!sys || *sys != "system") continue;
      size_t body = tag_end(tpl, i);
      const size_t endif = tpl.find("endif", body);
      if (!ne) {  // the injection sits in the else branch
        const size_t els = tpl.find("else", body);
        if (els == std::string_view::npos || els > endif) continue;
        body = tag_end(tpl, els);
      }
      auto text = first_literal_output(tpl, body, endif);
      if (text && text->rfind("<|im_start|>system", 0) == 0) return text;
    }
  }
  return std::nullopt;
}

} // namespace

std::string format_chatml(std::span<const chat_message> messages, std::string_view chat_template,
                          bool add_generation_prompt) {
  std::string out;
  if (!messages.empty() && messages.front().role != "system") {
    if (auto sys = default_system(chat_template)) out += *sys;
  }
  for (const chat_message& m : messages) {
    out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append("<|im_end|>\n");
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

} // namespace conveyor::model
