// Internal to the runtime: HTTP tool chats (transport::intake_context::plan_chat) rendered with
// the model's template by model::tool_chat, their prompt tokenized, their format checked against
// the grammar engine.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "model/text/grammar.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/tool_chat.hpp"
#include "transport/intake.hpp"

namespace conveyor::serve {

/// The model's tool chat, or why there is none; and a warning when its `required` grammar does
/// not compile with XGrammar (those calls are then parsed, not enforced).
struct tool_support {
  std::unique_ptr<model::tool_chat> chat;
  std::string error;
  std::string warning;
};

/// Builds the tool chat of template `source` (the model's, or --chat-template's) with the model's
/// special tokens (never throws: a template that does not compile is `error`).
tool_support load_tool_support(const model::tokenizer& tok, const std::string& source, const model::grammar_compiler* grammars);

/// plan_chat for the intakes. `tools`, `tok` and `grammars` (may be null) outlive it.
std::function<std::variant<transport::chat_plan, transport::chat_refusal>(const schemas::tool_chat_request&)>
make_plan_chat(const model::tokenizer& tok, const tool_support& tools, const model::grammar_compiler* grammars);

} // namespace conveyor::serve
