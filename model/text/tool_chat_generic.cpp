// conveyor's generic tool format, for templates that do not render tools (model/text/tool_chat.hpp):
// the tools go into the system message as JSON, the history's calls and results are written as
// text, and the answer is one JSON object held to a schema: {"tool_calls": [...]} or, when the
// model may answer without a tool (tool_choice auto), {"response": "..."}.
#include <cctype>
#include <cstring>

#include <nlohmann/json.hpp>

#include "model/text/tool_chat.hpp"
#include "model/text/tool_ids.hpp"

namespace conveyor::model::generic_tools {
namespace {

using json = nlohmann::ordered_json;
using choice = schemas::tool_chat_request::choice;


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

// The text of a JSON string literal's body as far as it has come (`s` starts after the opening
// quote); stops at the closing quote or before an escape that is not complete yet.
std::string json_string_so_far(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') break;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i + 1 >= s.size()) break;
    const char e = s[i + 1];
    if (e == 'u') {
      if (i + 6 > s.size()) break;
      const json one = json::parse("\"" + std::string(s.substr(i, 6)) + "\"", nullptr, false);
      if (one.is_string()) out += one.get<std::string>();  // (a lone surrogate half is dropped)
      i += 5;
      continue;
    }
    const char* from = "\"\\/bfnrt";
    const char* to = "\"\\/\b\f\n\r\t";
    if (const char* at = std::strchr(from, e); at && e) out += to[at - from];
    ++i;
  }
  return out;
}

class json_turn_parser final : public schemas::turn_parser {
public:
  // An answer without a tool ({"response": "..."}) streams as content while it comes; calls
  // come out whole at the end.
  std::vector<schemas::chat_turn_delta> feed(std::string_view text) override {
    text_ += text;
    const std::string now = response_so_far();
    if (now.size() <= shown_.size()) return {};
    std::string delta = now.substr(shown_.size());
    shown_ = now;
    return {{"", std::move(delta), -1, {}}};
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
    } else if (response_start() != std::string::npos) {
      turn_.content = response_so_far();  // cut off (max_tokens) inside the response
    } else {
      turn_.content = text_;
    }
    std::vector<schemas::chat_turn_delta> out;
    if (turn_.content.starts_with(shown_) && turn_.content.size() > shown_.size())
      out.push_back({"", turn_.content.substr(shown_.size()), -1, {}});
    else if (!turn_.content.starts_with(shown_))
      turn_.content = shown_;  // (never: what was shown stays the answer's start)
    for (size_t i = 0; i < turn_.tool_calls.size(); ++i) out.push_back({"", "", static_cast<int32_t>(i), turn_.tool_calls[i]});
    return out;
  }

  const schemas::chat_turn& turn() const override { return turn_; }

private:
  // Where the response string's body starts: after {"response": " (blanks allowed), or npos.
  size_t response_start() const {
    size_t i = 0;
    auto blanks = [&] {
      while (i < text_.size() && std::isspace(static_cast<unsigned char>(text_[i]))) ++i;
    };
    auto take = [&](std::string_view lit) {
      blanks();
      if (text_.compare(i, lit.size(), lit) != 0) return false;
      i += lit.size();
      return true;
    };
    if (take("{") && take("\"response\"") && take(":") && take("\"")) return i;
    return std::string::npos;
  }
  std::string response_so_far() const {
    const size_t at = response_start();
    return at == std::string::npos ? std::string() : json_string_so_far(std::string_view(text_).substr(at));
  }

  std::string text_, shown_;
  schemas::chat_turn turn_;
};

} // namespace

rendered prepare(const schemas::tool_chat_request& r) {
  json msgs = history(json::parse(r.messages));
  const json tools = offered_tools(r);
  if (tools.empty() && !r.function.empty()) throw tool_chat_error("tool_choice", "no tool in tools is named '" + r.function + "'");
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
