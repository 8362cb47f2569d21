// Tool calling (OpenAI `tools` on /v1/chat/completions) with llama.cpp's chat layer (common/chat,
// built by scripts/build_jinja.sh): the model's own template renders the tools and the tool-call
// history, and the family's parser (Hermes <tool_call> for Qwen2.5/3, Llama 3.1's JSON, Mistral's
// [TOOL_CALLS], and the rest llama.cpp knows) reads the output into calls, as llama-server does.
// `required` and a named function are enforced with the format's own grammar.
//
// A template that does not render tools (ChatML, SmolLM2) gets conveyor's generic format: the
// tools are described in the system message and the answer is one JSON object,
// {"tool_calls": [{"name", "arguments"}]} or (tool_choice auto) {"response": "..."}, held to
// that shape by a JSON schema, so small models call tools too.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/text/chat_template.hpp"
#include "schemas/chat_turn.hpp"

namespace conveyor::model {

/// A malformed message or tool, found while rendering: `field` is the request field it is about
/// ("messages", "tools", "tool_choice"); what() starts with it.
struct tool_chat_error : std::invalid_argument {
  tool_chat_error(std::string f, const std::string& message) : std::invalid_argument(f + ": " + message), field(std::move(f)) {}
  std::string field;
};

/// What a tool chat request becomes.
struct tool_chat_plan {
  std::string prompt;             ///< special tokens as text: encode with parse_special
  std::string grammar;            ///< EBNF (GBNF) the output must follow, or ""
  std::string json_schema;        ///< or a JSON schema's text (generic format), or ""
  std::vector<std::string> stops; ///< stop strings the format adds
  /// A fresh parser for one choice's output.
  std::function<std::unique_ptr<schemas::turn_parser>()> parser;
};

class tool_chat {
public:
  /// `source` as for chat_template (empty: ChatML). Throws chat_template_error.
  tool_chat(const std::string& source, chat_template::special_tokens tokens);
  /// The model's template, as chat_template::for_model reads it.
  static tool_chat for_model(const tokenizer& tok);
  tool_chat(tool_chat&&) noexcept;
  tool_chat& operator=(tool_chat&&) noexcept;
  ~tool_chat();

  /// Renders `r`. Throws tool_chat_error (a malformed message or tool) or chat_template_error
  /// (the template refused the messages). Thread-safe. A template that prints a date (Llama 3.x's
  /// "Today Date") gets today's, from the system clock in local time: llama.cpp's chat layer
  /// reads the clock itself, as llama-server does, and takes no time from its caller.
  tool_chat_plan plan(const schemas::tool_chat_request& r) const;

  /// True when the template renders tools itself (false: the generic JSON format).
  bool native() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

/// The generic format's parts (tool_chat_generic.cpp), exposed for tests.
namespace generic_tools {
/// `messages` (JSON text) with the tools described in the system message and the tool history
/// written as text; the schema the answer must follow.
struct rendered {
  std::string messages;
  std::string json_schema;  ///< "" when tool_choice is none
};
rendered prepare(const schemas::tool_chat_request& r);
std::unique_ptr<schemas::turn_parser> parser();
} // namespace generic_tools

} // namespace conveyor::model
