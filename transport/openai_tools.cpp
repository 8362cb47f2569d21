#include "transport/openai_tools.hpp"

#include <algorithm>
#include <cctype>

namespace conveyor::transport {
namespace {

using json = nlohmann::json;
using choice = schemas::tool_chat_request::choice;

[[noreturn]] void refuse(const std::string& param, const std::string& message) { throw openai_field_error(param, message); }

const json* field(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string string_field(const json& obj, std::string_view key, const std::string& name, bool required = true) {
  const json* v = field(obj, key);
  if (!v) {
    if (required) refuse(name, name + " is required");
    return "";
  }
  if (!v->is_string()) refuse(name, name + " must be a string");
  return v->get<std::string>();
}

// OpenAI's rule for function names: 1-64 of a-z, A-Z, 0-9, _ and -.
bool valid_function_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

std::vector<std::string> read_tools(const json& body, size_t max_tools) {
  std::vector<std::string> names;
  const json* tools = field(body, "tools");
  if (!tools) return names;
  if (!tools->is_array()) refuse("tools", "tools must be an array of {\"type\": \"function\", \"function\": {name, description, parameters}}");
  if (tools->size() > max_tools) refuse("tools", "tools has " + std::to_string(tools->size()) + " entries; at most " + std::to_string(max_tools));
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) refuse(at, at + " must be an object {\"type\": \"function\", \"function\": {...}}");
    if (string_field(t, "type", at + ".type") != "function") refuse(at + ".type", at + ".type must be \"function\" (the only tool type)");
    const json* f = field(t, "function");
    if (!f || !f->is_object()) refuse(at + ".function", at + ".function must be an object {name, description, parameters}");
    const std::string name = string_field(*f, "name", at + ".function.name");
    if (!valid_function_name(name)) refuse(at + ".function.name", at + ".function.name must be 1-64 characters of a-z, A-Z, 0-9, _ and -");
    for (const auto& n : names)
      if (n == name) refuse(at + ".function.name", "two tools are named '" + name + "'");
    (void)string_field(*f, "description", at + ".function.description", false);
    if (const json* p = field(*f, "parameters"); p && !p->is_object())
      refuse(at + ".function.parameters", at + ".function.parameters must be a JSON Schema object");
    if (const json* s = field(*f, "strict"); s && !s->is_boolean()) refuse(at + ".function.strict", at + ".function.strict must be true or false");
    names.push_back(name);
  }
  return names;
}

void read_choice(const json& body, const std::vector<std::string>& names, schemas::tool_chat_request& r) {
  const json* c = field(body, "tool_choice");
  if (!c) {
    r.tool_choice = names.empty() ? choice::none : choice::automatic;
    return;
  }
  if (c->is_string()) {
    const std::string s = c->get<std::string>();
    if (s == "none") r.tool_choice = choice::none;
    else if (s == "auto") r.tool_choice = choice::automatic;
    else if (s == "required") r.tool_choice = choice::required;
    else refuse("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  } else if (c->is_object()) {
    if (string_field(*c, "type", "tool_choice.type") != "function") refuse("tool_choice.type", "tool_choice.type must be \"function\"");
    const json* f = field(*c, "function");
    if (!f || !f->is_object()) refuse("tool_choice.function", "tool_choice.function must be {\"name\": ...}");
    r.function = string_field(*f, "name", "tool_choice.function.name");
    if (std::find(names.begin(), names.end(), r.function) == names.end())
      refuse("tool_choice.function.name", "tool_choice names '" + r.function + "', which is not in tools");
    r.tool_choice = choice::required;
  } else {
    refuse("tool_choice", "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (names.empty() && r.tool_choice == choice::required) refuse("tool_choice", "tool_choice requires a call but there are no tools: give tools");
  if (names.empty()) r.tool_choice = choice::none;
}

void check_content(const json& m, const std::string& at, bool may_be_null) {
  const json* c = field(m, "content");
  if (!c) {
    if (!may_be_null) refuse(at + ".content", at + ".content is required");
    return;
  }
  if (c->is_string()) return;
  if (!c->is_array()) refuse(at + ".content", at + ".content must be a string or an array of {\"type\": \"text\", \"text\": ...}");
  for (size_t k = 0; k < c->size(); ++k) {
    const json& part = (*c)[k];
    const std::string pn = at + ".content[" + std::to_string(k) + "]";
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      refuse(pn, pn + " must be {\"type\":\"text\",\"text\":...}: conveyor's models read text only");
  }
}

// The history; true when it holds tool calls or tool results.
bool check_messages(const json& body, size_t max_messages) {
  const json* msgs = field(body, "messages");
  if (!msgs) refuse("messages", "messages is required");
  if (!msgs->is_array() || msgs->empty()) refuse("messages", "messages must be a non-empty array of {role, content}");
  if (msgs->size() > max_messages)
    refuse("messages", "messages has " + std::to_string(msgs->size()) + " entries; at most " + std::to_string(max_messages));
  bool tool_history = false;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) refuse(at, at + " must be an object {role, content}");
    const std::string role = string_field(m, "role", at + ".role");
    if (role == "tool") {
      tool_history = true;
      (void)string_field(m, "tool_call_id", at + ".tool_call_id");
      check_content(m, at, false);
    } else if (role == "assistant") {
      const json* calls = field(m, "tool_calls");
      if (calls && (!calls->is_array())) refuse(at + ".tool_calls", at + ".tool_calls must be an array");
      for (size_t k = 0; calls && k < calls->size(); ++k) {
        const json& call = (*calls)[k];
        const std::string cat = at + ".tool_calls[" + std::to_string(k) + "]";
        if (!call.is_object()) refuse(cat, cat + " must be {id, type: \"function\", function: {name, arguments}}");
        (void)string_field(call, "id", cat + ".id");
        const json* f = field(call, "function");
        if (!f || !f->is_object()) refuse(cat + ".function", cat + ".function must be {name, arguments}");
        (void)string_field(*f, "name", cat + ".function.name");
        const std::string args = string_field(*f, "arguments", cat + ".function.arguments");
        if (!json::accept(args)) refuse(cat + ".function.arguments", cat + ".function.arguments must be a JSON object's text");
        tool_history = true;
      }
      check_content(m, at, calls && !calls->empty());
    } else if (role == "system" || role == "developer" || role == "user") {
      check_content(m, at, false);
    } else {
      refuse(at + ".role", at + ".role must be system, developer, user, assistant or tool");
    }
  }
  return tool_history;
}

} // namespace

std::optional<schemas::tool_chat_request> read_tool_chat(const json& body, size_t max_messages, size_t max_tools) {
  if (field(body, "functions")) refuse("functions", "functions is deprecated: send tools ([{\"type\": \"function\", \"function\": {...}}])");
  if (field(body, "function_call")) refuse("function_call", "function_call is deprecated: send tool_choice");
  schemas::tool_chat_request r;
  const std::vector<std::string> names = read_tools(body, max_tools);
  read_choice(body, names, r);
  if (const json* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) refuse("parallel_tool_calls", "parallel_tool_calls must be true or false");
    r.parallel_tool_calls = p->get<bool>();
  }
  const bool history = check_messages(body, max_messages);
  if (names.empty() && !history) return std::nullopt;
  r.messages = body.at("messages").dump();
  if (!names.empty()) r.tools = body.at("tools").dump();
  return r;
}

} // namespace conveyor::transport
