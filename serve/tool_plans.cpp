#include "serve/tool_plans.hpp"


namespace conveyor::serve {
namespace {

// The format a plan's output must follow; nullopt when the grammar engine refuses it (the
// output is then parsed only) or there is none.
std::optional<schemas::response_format> output_format(const model::tool_chat_plan& p, const model::grammar_compiler* grammars) {
  if (!p.json_schema.empty()) return schemas::response_format{schemas::response_format::kind::json_schema, p.json_schema};
  if (p.grammar.empty()) return std::nullopt;
  if (!grammars) return std::nullopt;
  try {
    (void)grammars->constrain(model::grammar_kind::ebnf, p.grammar);  // cached by its text: admission's compile is free
  } catch (const model::grammar_error&) {
    return std::nullopt;  // said once at start-up (tool_support::warning)
  }
  return schemas::response_format{schemas::response_format::kind::grammar, p.grammar};
}

} // namespace

tool_support load_tool_support(const model::tokenizer& tok, const std::string& source, const model::grammar_compiler* grammars) {
  tool_support s;
  try {
    s.chat = std::make_unique<model::tool_chat>(source, model::chat_template::tokens_of(tok));
  } catch (const std::exception& e) {
    s.error = e.what();
    return s;
  }
  if (!s.chat->native() || !grammars) return s;
  // One probe: does this family's `required` grammar compile with XGrammar?
  schemas::tool_chat_request probe;
  probe.messages = R"([{"role":"user","content":"hi"}])";
  probe.tools = R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"string"}}}}}])";
  probe.tool_choice = schemas::tool_chat_request::choice::required;
  try {
    const model::tool_chat_plan p = s.chat->plan(probe);
    if (p.grammar.empty()) s.warning = "this template's tool calls have no grammar conveyor can use";
    else (void)grammars->constrain(model::grammar_kind::ebnf, p.grammar);
  } catch (const std::exception& e) {
    s.warning = std::string("this template's tool-call grammar does not compile (") + e.what() + ")";
  }
  if (!s.warning.empty()) s.warning += "; tool_choice required and named functions are parsed but not enforced";
  return s;
}

std::function<std::variant<transport::chat_plan, transport::chat_refusal>(const schemas::tool_chat_request&)>
make_plan_chat(const model::tokenizer& tok, const tool_support& tools, const model::grammar_compiler* grammars) {
  using refusal = transport::chat_refusal;
  return [&tok, &tools, grammars](const schemas::tool_chat_request& r) -> std::variant<transport::chat_plan, refusal> {
    if (!tools.chat) return refusal{"tools", "tools: the model's chat template does not compile for tools (" + tools.error + "); see the server's log"};
    model::tool_chat_plan p;
    try {
      p = tools.chat->plan(r);
    } catch (const model::tool_chat_error& e) {
      return refusal{e.field, e.what()};
    } catch (const std::exception& e) {  // the template refused the messages (raise_exception)
      return refusal{"messages", e.what()};
    }
    transport::chat_plan out;
    try {
      out.prompt = tok.encode(p.prompt, /*parse_special=*/true);
    } catch (const std::exception& e) {
      return refusal{"messages", std::string("messages: cannot tokenize the rendered prompt: ") + e.what()};
    }
    if (out.prompt.empty()) return refusal{"messages", "messages: the rendered prompt has no tokens"};
    out.format = output_format(p, grammars);
    out.stops = std::move(p.stops);
    out.parser = std::move(p.parser);
    return out;
  };
}

} // namespace conveyor::serve
