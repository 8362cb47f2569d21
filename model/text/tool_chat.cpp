// tool_chat on llama.cpp's chat layer: what a request passes mirrors llama-server's
// oaicompat_chat_params_parse (messages and tools read by common_chat_*_parse_oaicompat,
// tool_choice, parallel_tool_calls, chat_template_kwargs and enable_thinking, reasoning_format
// deepseek when the server splits thinking), and the output is read as llama-server's
// task_result_state does (common_chat_parse over the text so far, diffs between parses).
// Differences, each because conveyor's grammar engine is XGrammar, not llama.cpp's sampler:
//  - llama.cpp feeds the generation prompt (the assistant turn's opener) through the grammar
//    before sampling; XGrammar starts at the output, so that literal is cut from the root rule.
//  - `auto` is not constrained (llama.cpp's lazy grammars start at a trigger pattern).
//  - a tool_choice naming one function offers only that tool and requires a call
//    (llama-server reads tool_choice as a string only).
#include "model/text/tool_chat.hpp"

#include <cstdint>
#include <regex>

#include "chat.h"
#include "json-schema-to-grammar.h"
#include "model/text/tokenizer.hpp"
#include "model/text/tool_ids.hpp"

namespace conveyor::model {
namespace {

using choice = schemas::tool_chat_request::choice;

std::string json_text(const std::variant<bool, int64_t, double, std::string>& v) {
  return std::visit([](const auto& x) { return common_json::make(x).dump(); }, v);
}

// The tool-call grammar without the generation prompt it starts with (see above); "" when its
// root does not start with it (then the output is parsed, not constrained).
std::string output_grammar(const std::string& gbnf, const std::string& generation_prompt, bool single_call, bool mistral) {
  const std::string head = "root ::= " + (generation_prompt.empty() ? std::string() : gbnf_format_literal(generation_prompt) + " ");
  size_t line = 0;
  if (!gbnf.starts_with("root ::= ")) {
    line = gbnf.find("\nroot ::= ");
    if (line == std::string::npos) return "";
    ++line;
  }
  if (gbnf.compare(line, head.size(), head) != 0) return "";
  std::string out = gbnf.substr(0, line) + "root ::= " + gbnf.substr(line + head.size());
  // llama.cpp lets any text come before a required call (`until-N?`, up to the call's opening
  // tag): a sampled model may then ramble until max_tokens and never call. The call comes first.
  const size_t eol = out.find('\n', line);
  const std::string root = out.substr(line, eol == std::string::npos ? std::string::npos : eol - line);
  const std::regex preamble(R"( until-\d+\?)");
  out.replace(line, root.size(), std::regex_replace(root, preamble, ""));
  // Formats that wrap each call in its own tags (Hermes' <tool_call>) repeat them whatever
  // parallel_tool_calls says: one call when the request asked for one.
  // Mistral's call ids are 9 letters and digits (its template refuses others in the history);
  // llama.cpp's grammar lets a sampled model write any string there, without end.
  const std::string any_id = R"(("\"" ( [^"\\] | "\\" ( ["\\/ bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\"" | json-number))";
  for (size_t at; mistral && (at = out.find(any_id)) != std::string::npos;) out.replace(at, any_id.size(), R"("\"" [a-zA-Z0-9]{9} "\"")");
  if (single_call) out = std::regex_replace(out, std::regex(R"((^|\n)tool-calls ::= \((.*)\)\+(\n|$))"), "$1tool-calls ::= $2$3");
  return out;
}

schemas::tool_call to_call(const common_chat_tool_call& c) { return {c.id, c.name, c.arguments}; }

// Parses the text so far after each piece, as llama-server does; the deltas are what changed.
class native_parser final : public schemas::turn_parser {
public:
  native_parser(std::shared_ptr<const common_chat_parser_params> params, size_t max_calls, bool mistral_ids)
      : params_(std::move(params)), max_calls_(max_calls), mistral_ids_(mistral_ids) {}

  std::vector<schemas::chat_turn_delta> feed(std::string_view text) override {
    text_ += text;
    return update(/*partial=*/true);
  }
  std::vector<schemas::chat_turn_delta> finish() override { return update(/*partial=*/false); }
  const schemas::chat_turn& turn() const override { return turn_; }

private:
  std::vector<schemas::chat_turn_delta> update(bool partial) {
    common_chat_msg next;
    try {
      next = common_chat_parse(text_, partial, *params_);
    } catch (const std::exception&) {
      if (partial) return {};  // more text may make it parse
      next = common_chat_msg{};  // the whole text does not parse: it is the answer's content, no calls
      next.role = "assistant";
      next.content = text_;
    }
    if (next.empty() && partial) return {};
    if (next.tool_calls.size() > max_calls_) next.tool_calls.resize(max_calls_);  // parallel_tool_calls: false
    next.set_tool_call_ids(ids_, [this] { return new_tool_call_id(mistral_ids_); });
    std::vector<schemas::chat_turn_delta> out;
    // What grew since the last parse. (llama.cpp's compute_diffs throws when a later parse is not
    // an extension of an earlier one; a stream cannot take back what it sent, so such a change
    // adds nothing here, and the whole answer, turn(), is the last parse.)
    auto grown = [](const std::string& before, const std::string& now) {
      return now.size() > before.size() && now.starts_with(before) ? now.substr(before.size()) : std::string();
    };
    schemas::chat_turn_delta text;
    text.reasoning = grown(msg_.reasoning_content, next.reasoning_content);
    text.content = grown(msg_.content, next.content);
    if (!text.reasoning.empty() || !text.content.empty()) out.push_back(std::move(text));
    for (size_t i = 0; i < next.tool_calls.size(); ++i) {
      const common_chat_tool_call& c = next.tool_calls[i];
      if (c.name.empty()) continue;  // its first part waits for its name
      schemas::chat_turn_delta x;
      x.tool_index = static_cast<int32_t>(i);
      if (i >= sent_args_.size()) sent_args_.resize(i + 1);
      if (i >= introduced_.size()) introduced_.resize(i + 1, false);
      x.call.arguments = grown(sent_args_[i], c.arguments);
      if (!introduced_[i]) {  // a call's id and name go out once, with its first part (as OpenAI streams them)
        introduced_[i] = true;
        x.call.id = c.id;
        x.call.name = c.name;
        x.call.arguments = c.arguments;  // (nothing of it sent yet)
      }
      if (x.call.id.empty() && x.call.arguments.empty()) continue;
      sent_args_[i] += x.call.arguments;
      out.push_back(std::move(x));
    }
    msg_ = std::move(next);
    turn_.reasoning = msg_.reasoning_content;
    turn_.content = msg_.content;
    turn_.tool_calls.clear();
    for (const auto& c : msg_.tool_calls) turn_.tool_calls.push_back(to_call(c));
    return out;
  }

  std::shared_ptr<const common_chat_parser_params> params_;
  size_t max_calls_;
  bool mistral_ids_;
  std::string text_;
  common_chat_msg msg_;
  std::vector<std::string> ids_;
  std::vector<bool> introduced_;      // per call: its id and name have gone out
  std::vector<std::string> sent_args_;  // per call: the arguments' text sent so far
  schemas::chat_turn turn_;
};

} // namespace

struct tool_chat::impl {
  common_chat_templates_ptr templates;
  chat_template::special_tokens tokens;
  bool native = false;
  bool thinking_default = false;
  bool mistral = false;  // [TOOL_CALLS] templates: 9-character call ids

  common_chat_templates_inputs inputs(const std::string& messages, const schemas::tool_chat_request& r) const {
    common_chat_templates_inputs in;
    try {
      in.messages = common_chat_msgs_parse_oaicompat(common_json::parse(messages));
    } catch (const std::exception& e) {
      throw tool_chat_error("messages", e.what());
    }
    in.add_generation_prompt = r.add_generation_prompt;
    in.enable_thinking = thinking_default;
    for (const auto& [key, value] : r.kwargs) {
      in.chat_template_kwargs[key] = json_text(value);
      if (key == "enable_thinking" && std::holds_alternative<bool>(value)) in.enable_thinking = std::get<bool>(value);
    }
    in.reasoning_format = r.reasoning ? COMMON_REASONING_FORMAT_DEEPSEEK : COMMON_REASONING_FORMAT_NONE;
    return in;
  }
};

tool_chat::tool_chat(const std::string& source, chat_template::special_tokens tokens) : p_(std::make_unique<impl>()) {
  p_->tokens = std::move(tokens);
  try {
    p_->templates = common_chat_templates_init(nullptr, source.empty() ? "chatml" : source, p_->tokens.bos, p_->tokens.eos);
    p_->native = common_chat_templates_get_caps(p_->templates.get())["supports_tools"];
    p_->thinking_default = common_chat_templates_support_enable_thinking(p_->templates.get());
    p_->mistral = source.find("[TOOL_CALLS]") != std::string::npos;
  } catch (const std::exception& e) {
    throw chat_template_error(std::string("chat template does not parse for tools: ") + e.what());
  }
}

tool_chat tool_chat::for_model(const tokenizer& tok) { return tool_chat(tok.chat_template(), chat_template::tokens_of(tok)); }

tool_chat::tool_chat(tool_chat&&) noexcept = default;
tool_chat& tool_chat::operator=(tool_chat&&) noexcept = default;
tool_chat::~tool_chat() = default;

bool tool_chat::native() const { return p_->native; }

tool_chat_plan tool_chat::plan(const schemas::tool_chat_request& r) const {
  tool_chat_plan out;
  const bool generic = !p_->native;
  generic_tools::rendered g;
  if (generic) g = generic_tools::prepare(r);
  common_chat_templates_inputs in = p_->inputs(generic ? g.messages : r.messages, r);
  if (!generic && !r.tools.empty()) {
    try {
      in.tools = common_chat_tools_parse_oaicompat(common_json::parse(r.tools));
    } catch (const std::exception& e) {
      throw tool_chat_error("tools", e.what());
    }
    if (!r.function.empty()) {
      std::erase_if(in.tools, [&](const common_chat_tool& t) { return t.name != r.function; });
      if (in.tools.empty()) throw tool_chat_error("tool_choice", "no tool in tools is named '" + r.function + "'");
    }
    in.tool_choice = !r.function.empty() || r.tool_choice == choice::required ? COMMON_CHAT_TOOL_CHOICE_REQUIRED
                     : r.tool_choice == choice::none                         ? COMMON_CHAT_TOOL_CHOICE_NONE
                                                                              : COMMON_CHAT_TOOL_CHOICE_AUTO;
    in.parallel_tool_calls = r.parallel_tool_calls && r.function.empty();
  }
  common_chat_params params;
  try {
    params = common_chat_templates_apply(p_->templates.get(), in);
  } catch (const tool_chat_error&) {
    throw;
  } catch (const std::exception& e) {
    throw chat_template_error(std::string("chat template: ") + e.what());
  }
  out.prompt = std::move(params.prompt);
  if (p_->tokens.add_bos && out.prompt.starts_with(p_->tokens.bos)) out.prompt.erase(0, p_->tokens.bos.size());
  out.stops = params.additional_stops;
  if (generic) {
    out.json_schema = std::move(g.json_schema);
    if (!out.json_schema.empty()) out.parser = [] { return generic_tools::parser(); };
  }
  if (!out.parser) {
    if (!params.grammar_lazy && in.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED)
      out.grammar = output_grammar(params.grammar, params.generation_prompt, !in.parallel_tool_calls, p_->mistral);
    auto pp = std::make_shared<common_chat_parser_params>(params);
    pp->reasoning_format = in.reasoning_format;
    pp->parse_tool_calls = !in.tools.empty() && in.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE;
    if (!params.parser.empty()) pp->parser.load(params.parser);
    const size_t max_calls = in.parallel_tool_calls ? SIZE_MAX : 1;
    out.parser = [pp = std::shared_ptr<const common_chat_parser_params>(std::move(pp)), max_calls, m = p_->mistral] {
      return std::make_unique<native_parser>(pp, max_calls, m);
    };
  }
  return out;
}

} // namespace conveyor::model
