// conveyor's generic tool format, for templates that do not render tools (model/text/tool_chat.hpp):
// the tools go into the system message as JSON, the history's calls and results are written as
// text, and the answer is one JSON object held to a schema: {"tool_calls": [...]} or, when the
// model may answer without a tool (tool_choice auto), {"response": "..."}.
#include <nlohmann/json.hpp>

#include "model/text/tool_chat.hpp"
#include "model/text/tool_ids.hpp"

namespace conveyor::model::generic_tools {
namespace {

using json = nlohmann::ordered_json;
using choice = schemas::tool_chat_request::choice;

[[noreturn]] void refuse(const std::string& why) { throw tool_chat_error(why); }

// The offered tools as {name, description, parameters}, after tool_choice picked one.
json offered_tools(const schemas::tool_chat_request& r) {
  json out = json::array();
  if (r.tools.empty() || r.tool_choice == choice::none) return out;
  for (const auto& t : json::parse(r.tools)) {
    const json& f = t.at("function");
    const std::string name = f.at("name").get<std::string>();
    if (!r.function.empty() && name != r.function) continue;
    json one = {{"name", name}};
    if (f.contains("description")) one["description"] = f["description"];
    one["parameters"] = f.contains("parameters") && f["parameters"].is_object() ? f["parameters"] : json{{"type", "object"}};
    out.push_back(std::move(one));
  }
  return out;
}

json calls_schema(const json& tools, bool parallel) {
  json any = json::array();
  for (const auto& t : tools)
    any.push_back({{"type", "object"},
                   {"properties", {{"name", {{"const", t["name"]}}}, {"arguments", t["parameters"]}}},
                   {"required", {"name", "arguments"}},
                   {"additionalProperties", false}});
  json items = any.size() == 1 ? any[0] : json{{"anyOf", any}};
  json calls = {{"type", "array"}, {"items", items}, {"minItems", 1}};
  if (!parallel) calls["maxItems"] = 1;
  return {{"type", "object"}, {"properties", {{"tool_calls", calls}}}, {"required", {"tool_calls"}}, {"additionalProperties", false}};
}

std::string instructions(const json& tools, bool may_answer) {
  std::string s = "You can call these tools (each one's arguments follow its JSON Schema `parameters`):\n" + tools.dump(2) +
                  "\n\nTo call tools, answer with only a JSON object: {\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": "
                  "{<the arguments>}}]}.";
  if (may_answer) s += " To answer without a tool, answer with only {\"response\": \"<your answer>\"}.";
  return s;
}

// A message's content as text: a string, null, or [{type: text, text}] parts.
std::string content_text(const json& m) {
  if (!m.contains("content") || m["content"].is_null()) return "";
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array())
    for (const auto& part : c)
      if (part.is_object() && part.value("type", "") == "text") out += part.value("text", "");
  return out;
}

// The call history as the generic format writes it: an assistant's calls as its JSON answer,
// a tool's result as a user message naming the call.
json history(const json& msgs) {
  json out = json::array();
  for (const auto& m : msgs) {
    const std::string role = m.value("role", "");
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
      json calls = json::array();
      for (const auto& c : m["tool_calls"]) {
        const json& f = c.at("function");
        json args = f.value("arguments", std::string("{}"));
        if (args.is_string()) args = json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        calls.push_back({{"name", f.at("name")}, {"arguments", args.is_discarded() ? json::object() : args}});
      }
      out.push_back({{"role", "assistant"}, {"content", json{{"tool_calls", calls}}.dump()}});
    } else if (role == "tool") {
      out.push_back({{"role", "user"}, {"content", "Result of tool call " + m.value("tool_call_id", std::string("?")) + ":\n" + content_text(m)}});
    } else {
      out.push_back({{"role", role}, {"content", content_text(m)}});
    }
  }
  return out;
}

class json_turn_parser final : public schemas::turn_parser {
public:
  std::vector<schemas::chat_turn_delta> feed(std::string_view text) override {
    text_ += text;
    return {};
  }

  // The whole answer: its calls or its response; anything else is content as it came.
  std::vector<schemas::chat_turn_delta> finish() override {
    const json doc = json::parse(text_, nullptr, /*allow_exceptions=*/false);
    if (doc.is_object() && doc.contains("tool_calls") && doc["tool_calls"].is_array()) {
      for (const auto& c : doc["tool_calls"])
        if (c.is_object() && c.contains("name") && c["name"].is_string())
          turn_.tool_calls.push_back({new_tool_call_id(), c["name"].get<std::string>(), c.value("arguments", json::object()).dump()});
    } else if (doc.is_object() && doc.size() == 1 && doc.contains("response") && doc["response"].is_string()) {
      turn_.content = doc["response"].get<std::string>();
    } else {
      turn_.content = text_;
    }
    std::vector<schemas::chat_turn_delta> out;
    if (!turn_.content.empty()) out.push_back({"", turn_.content, -1, {}});
    for (size_t i = 0; i < turn_.tool_calls.size(); ++i) out.push_back({"", "", static_cast<int32_t>(i), turn_.tool_calls[i]});
    return out;
  }

  const schemas::chat_turn& turn() const override { return turn_; }

private:
  std::string text_;
  schemas::chat_turn turn_;
};

} // namespace

rendered prepare(const schemas::tool_chat_request& r) {
  json msgs = history(json::parse(r.messages));
  const json tools = offered_tools(r);
  if (tools.empty() && !r.function.empty()) refuse("tool_choice: no tool in tools is named '" + r.function + "'");
  rendered out;
  if (!tools.empty()) {
    const bool may_answer = r.tool_choice == choice::automatic && r.function.empty();
    const std::string text = instructions(tools, may_answer);
    if (!msgs.empty() && msgs[0]["role"] == "system")
      msgs[0]["content"] = msgs[0]["content"].get<std::string>() + "\n\n" + text;
    else
      msgs.insert(msgs.begin(), json{{"role", "system"}, {"content", text}});
    json schema = calls_schema(tools, r.parallel_tool_calls && r.function.empty());
    if (may_answer)
      schema = {{"anyOf",
                 {schema,
                  {{"type", "object"}, {"properties", {{"response", {{"type", "string"}}}}}, {"required", {"response"}}, {"additionalProperties", false}}}}};
    out.json_schema = schema.dump();
  }
  out.messages = msgs.dump();
  return out;
}

std::unique_ptr<schemas::turn_parser> parser() { return std::make_unique<json_turn_parser>(); }

} // namespace conveyor::model::generic_tools
