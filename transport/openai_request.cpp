// parse_openai_request(): the body's fields, one by one, into a submit_request. A refusal is
// thrown inside as `bad` and returned as an openai_error naming the field.
#include "transport/openai_request.hpp"

#include "transport/openai_tools.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace conveyor::transport {
namespace {

using json = nlohmann::ordered_json;  // keeps a schema's property order (the output follows it)

constexpr int max_json_depth = 64;

struct bad {
  std::string param, message;
  int status = 400;
};

[[noreturn]] void refuse(const std::string& param, const std::string& message, int status = 400) { throw bad{param, message, status}; }

// Fields read as OpenAI documents them; `ignored` ones are accepted and have no effect here.
const std::set<std::string, std::less<>> common_fields = {
    "model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "seed", "presence_penalty",
    "frequency_penalty", "logit_bias", "user", "response_format", "logprobs",
    // conveyor's (and vLLM's) extras
    "top_k", "min_p", "repetition_penalty", "min_tokens", "ignore_eos", "stop_token_ids", "priority", "deadline_ms"};
const std::set<std::string, std::less<>> chat_fields = {"messages", "max_completion_tokens", "top_logprobs", "chat_template_kwargs", "tools", "tool_choice",
                                                        "functions", "function_call", "parallel_tool_calls", "store", "metadata",
                                                        "service_tier"};
const std::set<std::string, std::less<>> completion_fields = {"prompt", "echo", "suffix", "best_of"};

const json* field(const json& body, std::string_view key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

int64_t read_int(const json& body, std::string_view key, int64_t lo, int64_t hi, int64_t dflt) {
  const json* v = field(body, key);
  if (!v) return dflt;
  const std::string k(key);
  if (!v->is_number_integer()) refuse(k, k + " must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    refuse(k, k + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) refuse(k, k + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::optional<double> read_number(const json& body, std::string_view key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) refuse(std::string(key), std::string(key) + " must be a number");
  return v->get<double>();
}

bool read_bool(const json& body, std::string_view key, bool dflt) {
  const json* v = field(body, key);
  if (!v) return dflt;
  if (!v->is_boolean()) refuse(std::string(key), std::string(key) + " must be true or false");
  return v->get<bool>();
}

std::string read_string(const json& v, const std::string& name) {
  if (!v.is_string()) refuse(name, name + " must be a string");
  return v.get<std::string>();
}

std::vector<token_id> read_token_ids(const json& v, const std::string& name, size_t max_count) {
  if (v.size() > max_count) refuse(name, name + " has " + std::to_string(v.size()) + " entries; at most " + std::to_string(max_count));
  std::vector<token_id> ids;
  for (const auto& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      refuse(name, name + " must hold token ids (integers >= 0)");
    ids.push_back(static_cast<token_id>(t.get<int64_t>()));
  }
  return ids;
}

// A float sampling field, checked by the engine's own ranges.
void read_sampling(const json& body, std::string_view key, float& out, float sampling_params::*member) {
  auto v = read_number(body, key);
  if (!v) return;
  sampling_params probe;
  probe.*member = static_cast<float>(*v);
  if (std::string why = probe.validate(); !why.empty()) refuse(std::string(key), why);
  out = probe.*member;
}

// {"<token id>": bias, ...}, sorted by id; the ranges are the engine's (sampling_params).
std::vector<std::pair<token_id, float>> read_logit_bias(const json& body) {
  std::vector<std::pair<token_id, float>> out;
  const json* v = field(body, "logit_bias");
  if (!v) return out;
  if (!v->is_object()) refuse("logit_bias", "logit_bias must be an object of token id -> bias");
  if (v->size() > max_logit_bias)
    refuse("logit_bias", "logit_bias names " + std::to_string(v->size()) + " tokens; at most " + std::to_string(max_logit_bias) + " are allowed");
  for (const auto& [k, b] : v->items()) {
    const int64_t id = schemas::logit_bias_key(k);
    if (id < 0) refuse("logit_bias", "logit_bias keys must be token ids (\"50256\"), got \"" + k.substr(0, 32) + "\"");
    if (!b.is_number()) refuse("logit_bias", "logit_bias: the bias of token " + k + " must be a number");
    out.emplace_back(static_cast<token_id>(id), schemas::logit_bias_value(b.get<double>()));
  }
  if (std::string why = schemas::finish_logit_bias(out); !why.empty()) refuse("logit_bias", why);
  return out;
}

void refuse_unsupported(const json& body) {
  constexpr int64_t i32 = std::numeric_limits<int32_t>::max();
  if (read_int(body, "best_of", 1, i32, 1) != 1) refuse("best_of", "best_of must be 1");
  if (const json* v = field(body, "suffix"); v && !(v->is_string() && v->get<std::string>().empty()))
    refuse("suffix", "suffix is not supported by conveyor");
}

std::optional<schemas::response_format> read_response_format(const json& body) {
  const json* rf = field(body, "response_format");
  if (!rf) return std::nullopt;
  if (!rf->is_object()) refuse("response_format", "response_format must be an object with a type");
  const json* type = field(*rf, "type");
  if (!type || !type->is_string()) refuse("response_format.type", "response_format.type is required: text, json_object, json_schema, regex or grammar");
  const std::string t = type->get<std::string>();
  using kind = schemas::response_format::kind;
  if (t == "text") return std::nullopt;
  if (t == "json_object") return schemas::response_format{kind::json_object, ""};
  if (t == "json_schema") {
    const json* js = field(*rf, "json_schema");
    if (!js || !js->is_object()) refuse("response_format.json_schema", "response_format.json_schema must be an object with a schema");
    const json* schema = field(*js, "schema");
    if (!schema || !(schema->is_object() || schema->is_boolean()))
      refuse("response_format.json_schema.schema", "response_format.json_schema.schema must be a JSON schema (an object)");
    return schemas::response_format{kind::json_schema, schema->dump()};
  }
  if (t == "regex" || t == "grammar") {
    const std::string key = t == "regex" ? "pattern" : "grammar";
    const json* spec = field(*rf, key);
    if (!spec || !spec->is_string() || spec->get<std::string>().empty())
      refuse("response_format." + key, "response_format." + key + " is required (a non-empty string)");
    return schemas::response_format{t == "regex" ? kind::regex : kind::grammar, spec->get<std::string>()};
  }
  refuse("response_format.type", "response_format.type must be text, json_object, json_schema, regex or grammar");
}

std::string message_content(const json& m, const std::string& name) {
  const json* c = field(m, "content");
  if (!c) refuse(name + ".content", name + ".content is required");
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) refuse(name + ".content", name + ".content must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& part = (*c)[i];
    const std::string pn = name + ".content[" + std::to_string(i) + "]";
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      refuse(pn, pn + " must be {\"type\":\"text\",\"text\":...}: conveyor's models read text only");
    const json* t = field(part, "text");
    if (!t) refuse(pn + ".text", pn + ".text is required");
    text += read_string(*t, pn + ".text");
  }
  return text;
}

schemas::prompt_input read_messages(const json& body, const schemas::decode_limits& limits) {
  const json* msgs = field(body, "messages");
  if (!msgs) refuse("messages", "messages is required");
  if (!msgs->is_array() || msgs->empty()) refuse("messages", "messages must be a non-empty array of {role, content}");
  if (msgs->size() > limits.max_messages)
    refuse("messages", "messages has " + std::to_string(msgs->size()) + " entries; at most " + std::to_string(limits.max_messages));
  std::vector<schemas::chat_message> out;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) refuse(name, name + " must be an object {role, content}");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) refuse(name + ".role", name + ".role is required");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant") refuse(name + ".role", name + ".role must be system, developer, user or assistant");
    out.push_back({r, message_content(m, name)});
  }
  return out;
}

schemas::prompt_input read_prompt(const json& body, const schemas::decode_limits& limits) {
  const json* p = field(body, "prompt");
  if (!p) refuse("prompt", "prompt is required");
  if (p->is_string()) {
    if (p->get<std::string>().empty()) refuse("prompt", "prompt must not be empty");
    return p->get<std::string>();
  }
  if (!p->is_array() || p->empty()) refuse("prompt", "prompt must be a string, an array of token ids, or an array of one of those");
  if ((*p)[0].is_number_integer()) return read_token_ids(*p, "prompt", limits.max_array_len);
  if (p->size() != 1) refuse("prompt", "prompt holds " + std::to_string(p->size()) + " prompts; conveyor takes one per request");
  const json& one = (*p)[0];
  if (one.is_string() && !one.get<std::string>().empty()) return one.get<std::string>();
  if (one.is_array() && !one.empty()) return read_token_ids(one, "prompt[0]", limits.max_array_len);
  refuse("prompt", "prompt must be a non-empty string or array of token ids");
}

// {"enable_thinking": false, ...}: passed to the chat template; scalar values only.
void read_template_kwargs(const json& body, schemas::submit_request& j) {
  const json* kw = field(body, "chat_template_kwargs");
  if (!kw) return;
  if (!kw->is_object()) refuse("chat_template_kwargs", "chat_template_kwargs must be an object of template variables");
  for (const auto& [k, v] : kw->items()) {
    const std::string name = "chat_template_kwargs." + k;
    if (k == "messages") refuse(name, "chat_template_kwargs may not set messages (send them as messages)");
    if (v.is_boolean()) j.chat_template_kwargs.emplace_back(k, v.get<bool>());
    else if (v.is_number_integer() && !v.is_number_unsigned()) j.chat_template_kwargs.emplace_back(k, v.get<int64_t>());
    else if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      j.chat_template_kwargs.emplace_back(k, static_cast<int64_t>(v.get<uint64_t>()));
    else if (v.is_number_float()) j.chat_template_kwargs.emplace_back(k, v.get<double>());
    else if (v.is_string()) j.chat_template_kwargs.emplace_back(k, v.get<std::string>());
    else refuse(name, name + " must be true/false, a number or a string");
  }
}

void read_model(const json& body, const std::string& served_model, openai_request& r) {
  if (const json* m = field(body, "model")) r.model = read_string(*m, "model");
  if (!r.model.empty() && r.model != served_model)
    refuse("model", "the model '" + r.model + "' does not exist here; this server runs '" + served_model + "' (GET /v1/models)", 404);
  if (r.model.empty()) r.model = served_model;
}

// /tokenize {prompt | messages, return_token_strs} and /detokenize {tokens}, as vLLM's. The ids are
// those a job with the same input gets, so add_special_tokens and add_generation_prompt may only
// be what a job does (their defaults).
openai_request read_tokenize(const json& body, openai_endpoint ep, const std::string& served_model,
                             const schemas::decode_limits& limits) {
  const bool tok = ep == openai_endpoint::tokenize;
  const std::set<std::string, std::less<>> fields =
      tok ? std::set<std::string, std::less<>>{"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt", "return_token_strs",
                                               "chat_template_kwargs"}
          : std::set<std::string, std::less<>>{"model", "tokens"};
  for (const auto& [k, v] : body.items())
    if (!fields.contains(k)) refuse(k, "unknown field '" + k + "' for " + (tok ? "/tokenize" : "/detokenize") + " (see docs/http.md)");
  openai_request r;
  r.endpoint = ep;
  read_model(body, served_model, r);
  if (!tok) {
    const json* t = field(body, "tokens");
    if (!t || !t->is_array()) refuse("tokens", "tokens is required: an array of token ids");
    r.job.input = read_token_ids(*t, "tokens", limits.max_array_len);
    return r;
  }
  const bool chat = field(body, "messages") != nullptr;
  if (chat == (field(body, "prompt") != nullptr)) refuse("prompt", "give exactly one of prompt and messages");
  r.job.input = chat ? read_messages(body, limits) : read_prompt(body, limits);
  const char* fixed = chat ? "add_generation_prompt" : "add_special_tokens";
  if (!read_bool(body, fixed, true))
    refuse(fixed, std::string("conveyor tokenizes as a job's ") + (chat ? "messages" : "prompt") + " is: " + fixed + " must be true (or left out)");
  if (read_bool(body, chat ? "add_special_tokens" : "add_generation_prompt", false))
    refuse(chat ? "add_special_tokens" : "add_generation_prompt",
           std::string(chat ? "add_special_tokens" : "add_generation_prompt") + " must be false (or left out) with " + (chat ? "messages" : "prompt"));
  r.return_token_strs = read_bool(body, "return_token_strs", false);
  read_template_kwargs(body, r.job);
  return r;
}

openai_request read(const json& body, openai_endpoint ep, const std::string& served_model, const schemas::decode_limits& limits) {
  if (!body.is_object()) refuse("", "the request body must be a JSON object");
  if (ep == openai_endpoint::tokenize || ep == openai_endpoint::detokenize) return read_tokenize(body, ep, served_model, limits);
  const bool chat = ep == openai_endpoint::chat_completions;
  for (const auto& [k, v] : body.items())
    if (!common_fields.contains(k) && !(chat ? chat_fields : completion_fields).contains(k))
      refuse(k, "unknown field '" + k + "' for " + (chat ? "/v1/chat/completions" : "/v1/completions") + " (see docs/http.md for the fields conveyor reads)");
  openai_request r;
  r.endpoint = ep;
  read_model(body, served_model, r);
  refuse_unsupported(body);
  r.n = static_cast<int32_t>(read_int(body, "n", 1, max_choices, 1));
  schemas::submit_request& j = r.job;
  if (chat) r.tools = read_tool_chat(body, limits.max_messages, max_tools);
  // A tool chat's prompt is rendered by the server's tool_chat (http_intake): no messages here.
  j.input = r.tools ? schemas::prompt_input{std::vector<schemas::chat_message>{}} : chat ? read_messages(body, limits) : read_prompt(body, limits);
  if (chat) read_template_kwargs(body, j);
  if (r.tools) r.tools->kwargs = j.chat_template_kwargs;
  constexpr int64_t i32 = std::numeric_limits<int32_t>::max();
  // OpenAI's defaults: 16 tokens for completions; chat runs to EOS (here: max_model_len).
  j.max_tokens = static_cast<int32_t>(read_int(body, "max_tokens", 1, i32, chat ? i32 : 16));
  if (chat) j.max_tokens = static_cast<int32_t>(read_int(body, "max_completion_tokens", 1, i32, j.max_tokens));
  read_sampling(body, "temperature", j.temperature, &sampling_params::temperature);
  read_sampling(body, "top_p", j.top_p, &sampling_params::top_p);
  read_sampling(body, "min_p", j.min_p, &sampling_params::min_p);
  j.top_k = static_cast<int32_t>(read_int(body, "top_k", -1, i32, 0));
  if (j.top_k < 0) j.top_k = 0;  // vLLM's -1 = off
  read_sampling(body, "presence_penalty", j.presence_penalty, &sampling_params::presence_penalty);
  read_sampling(body, "frequency_penalty", j.frequency_penalty, &sampling_params::frequency_penalty);
  read_sampling(body, "repetition_penalty", j.repetition_penalty, &sampling_params::repetition_penalty);
  j.logit_bias = read_logit_bias(body);
  if (const json* s = field(body, "seed")) {
    if (!s->is_number_integer() || (s->is_number_integer() && !s->is_number_unsigned() && s->get<int64_t>() < 0))
      refuse("seed", "seed must be an integer >= 0");
    j.seed = s->get<uint64_t>();
  }
  if (const json* s = field(body, "stop")) {
    if (s->is_string()) {
      j.stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      for (const auto& x : *s) j.stop.push_back(read_string(x, "stop"));
    } else {
      refuse("stop", "stop must be a string or an array of strings");
    }
    if (j.stop.size() > limits.max_stop_strings) refuse("stop", "stop has more than " + std::to_string(limits.max_stop_strings) + " strings");
    for (const auto& x : j.stop)
      if (x.empty() || x.size() > limits.max_stop_bytes)
        refuse("stop", "each stop string must be 1.." + std::to_string(limits.max_stop_bytes) + " bytes");
  }
  if (const json* s = field(body, "stop_token_ids")) {
    if (!s->is_array()) refuse("stop_token_ids", "stop_token_ids must be an array of token ids");
    j.stop_token_ids = read_token_ids(*s, "stop_token_ids", limits.max_stop_token_ids);
  }
  j.ignore_eos = read_bool(body, "ignore_eos", false);
  j.min_tokens = static_cast<int32_t>(read_int(body, "min_tokens", 0, j.max_tokens, 0));
  j.priority = static_cast<int32_t>(read_int(body, "priority", std::numeric_limits<int32_t>::min(), i32, 0));
  if (field(body, "deadline_ms")) j.deadline_ms = read_int(body, "deadline_ms", 1, std::numeric_limits<int64_t>::max(), 1);
  if (chat) {
    r.logprobs = read_bool(body, "logprobs", false);
    r.top_logprobs = static_cast<int32_t>(read_int(body, "top_logprobs", 0, max_top_logprobs, 0));
    if (r.top_logprobs > 0 && !r.logprobs) refuse("top_logprobs", "top_logprobs needs logprobs: true");
  } else if (field(body, "logprobs")) {
    r.top_logprobs = static_cast<int32_t>(read_int(body, "logprobs", 0, max_top_logprobs, 0));
    r.logprobs = true;
  }
  j.logprobs = r.logprobs;
  j.top_logprobs = r.top_logprobs;
  if (!chat && read_bool(body, "echo", false)) {  // the prompt before the answer; with logprobs, its tokens' too
    r.echo = true;
    if (r.logprobs) j.prompt_logprobs = r.top_logprobs;
  }
  r.stream = read_bool(body, "stream", false);
  j.stream = r.stream;
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) refuse("stream_options", "stream_options must be an object");
    if (!r.stream) refuse("stream_options", "stream_options is only allowed with stream: true");
    for (const auto& [k, v] : so->items())
      if (k != "include_usage") refuse("stream_options." + k, "unknown field 'stream_options." + k + "'");
    r.include_usage = read_bool(*so, "include_usage", false);
  }
  if (const json* u = field(body, "user")) (void)read_string(*u, "user");
  j.format = read_response_format(body);
  if (j.format && r.tools && r.tools->tool_choice != schemas::tool_chat_request::choice::none)
    refuse("response_format", "response_format cannot be combined with tools (the calls have their own format); leave one out or set tool_choice to none");
  return r;
}

} // namespace

std::string to_json(const openai_error& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<openai_request, openai_error> parse_openai_request(std::string_view body, openai_endpoint endpoint,
                                                                const std::string& served_model,
                                                                const schemas::decode_limits& limits) {
  try {
    // Nesting is bounded while parsing: a schema is written out again (dump() recurses), and a
    // few hundred KB of brackets would otherwise exhaust a handler thread's stack.
    const json doc = json::parse(body, [](int depth, json::parse_event_t, json&) {
      if (depth > max_json_depth)
        throw bad{"", "the body nests deeper than " + std::to_string(max_json_depth) + " levels (a schema that deep is not supported)"};
      return true;
    });
    openai_request r = read(doc, endpoint, served_model, limits);
    if (r.tools) {  // the template sees tools and messages with their keys in the order sent (json sorts them)
      const auto ordered = nlohmann::ordered_json::parse(body);
      r.tools->messages = ordered.at("messages").dump();
      if (!r.tools->tools.empty()) r.tools->tools = ordered.at("tools").dump();
    }
    return r;
  } catch (const openai_field_error& f) {
    return openai_error{400, f.what(), "invalid_request_error", f.param, "bad_request"};
  } catch (const bad& b) {
    openai_error e;
    e.status = b.status;
    e.message = b.message;
    e.param = b.param;
    e.code = b.status == 404 ? "model_not_found" : "bad_request";
    return e;
  } catch (const json::parse_error& p) {
    return openai_error{400, std::string("the body is not valid JSON: ") + p.what(), "invalid_request_error", "", "bad_request"};
  } catch (const std::exception& x) {
    return openai_error{400, std::string("the body cannot be read: ") + x.what(), "invalid_request_error", "", "bad_request"};
  }
}

} // namespace conveyor::transport
