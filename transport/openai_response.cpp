#include "transport/openai_response.hpp"

#include <nlohmann/json.hpp>

namespace conveyor::transport {
namespace {

using json = nlohmann::json;

bool is_chat(const openai_context& c) { return c.req->endpoint == openai_endpoint::chat_completions; }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string response_id(const openai_context& c) { return (is_chat(c) ? "chatcmpl-" : "cmpl-") + c.job_id; }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char ch : s) b.push_back(static_cast<int>(ch));
  return b;
}

// Chat logprobs entries ({"token","logprob","bytes","top_logprobs"}) for one tokens event.
// The event's logprob of token i, and its alternatives (none when the job did not ask).
float logprob_at(const schemas::tokens_event& ev, size_t i) { return ev.logprobs && i < ev.logprobs->size() ? (*ev.logprobs)[i] : 0.0f; }
const std::vector<token_logprob>& alternatives_at(const schemas::tokens_event& ev, size_t i) {
  static const std::vector<token_logprob> none;
  return ev.top_logprobs && i < ev.top_logprobs->size() ? (*ev.top_logprobs)[i] : none;
}

void chat_logprobs(const openai_context& c, const schemas::tokens_event& ev, json& content) {
  for (size_t i = 0; i < ev.token_ids.size(); ++i) {
    const std::string tok = c.piece(ev.token_ids[i]);
    json alts = json::array();
    for (const auto& a : alternatives_at(ev, i)) {
      const std::string at = c.piece(a.token);
      alts.push_back({{"token", at}, {"logprob", a.logprob}, {"bytes", bytes_of(at)}});
    }
    content.push_back({{"token", tok}, {"logprob", logprob_at(ev, i)}, {"bytes", bytes_of(tok)}, {"top_logprobs", alts}});
  }
}

// Completions logprobs ({"tokens","token_logprobs","top_logprobs","text_offset"}) for one event;
// `offset` is the text's length before it.
void completion_logprobs(const openai_context& c, const schemas::tokens_event& ev, json& lp, size_t& offset) {
  for (size_t i = 0; i < ev.token_ids.size(); ++i) {
    const std::string tok = c.piece(ev.token_ids[i]);
    lp["tokens"].push_back(tok);
    lp["token_logprobs"].push_back(logprob_at(ev, i));
    lp["text_offset"].push_back(offset);
    offset += tok.size();
    json alts = json::object();
    for (const auto& a : alternatives_at(ev, i)) alts[c.piece(a.token)] = a.logprob;
    lp["top_logprobs"].push_back(c.req->top_logprobs > 0 ? alts : json(nullptr));
  }
}

// The prompt's tokens in completions logprobs (echo): nulls for the first, which nothing predicts.
void prompt_completion_logprobs(const openai_context& c, const schemas::prompt_scores& p, json& lp) {
  size_t offset = 0;
  for (size_t i = 0; i < p.token_ids.size(); ++i) {
    const std::string tok = c.piece(p.token_ids[i]);
    lp["tokens"].push_back(tok);
    lp["token_logprobs"].push_back(i == 0 || i > p.logprobs.size() ? json(nullptr) : json(p.logprobs[i - 1]));
    lp["text_offset"].push_back(offset);
    offset += tok.size();
    json alts = json::object();
    if (p.top && i > 0 && i <= p.top->size())
      for (const auto& a : (*p.top)[i - 1]) alts[c.piece(a.token)] = a.logprob;
    lp["top_logprobs"].push_back(c.req->top_logprobs > 0 && i > 0 ? alts : json(nullptr));
  }
}

// Completions with echo: the text and the logprobs of a first tokens event get the prompt first;
// the answer's offsets continue after the prompt's text.
size_t echo_prompt(const openai_context& c, const schemas::tokens_event& first, std::string& text, json* lp) {
  text.insert(0, c.req->echo_text);
  if (lp && first.prompt) prompt_completion_logprobs(c, *first.prompt, *lp);
  return c.req->echo_text.size();
}

json empty_completion_logprobs() {
  return {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
}

// The prompt once (every choice has the same one; the first's cache hits), every completion.
template <class Done>
json usage(const std::vector<Done>& choices, const schemas::done_event& (*done_of)(const Done&)) {
  const schemas::usage_info& first = done_of(choices.front()).usage;
  int64_t completion = 0;
  for (const auto& ch : choices) completion += done_of(ch).usage.completion_tokens;
  return {{"prompt_tokens", first.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", first.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens}}}};
}

const schemas::done_event& itself(const schemas::done_event& d) { return d; }
const schemas::done_event& done_of_choice(const choice_events& c) { return c.done; }

json chunk_head(const openai_context& c) {
  return {{"id", response_id(c)}, {"object", is_chat(c) ? "chat.completion.chunk" : "text_completion"}, {"created", c.created}, {"model", c.req->model}};
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// A tool chat's answer ends with finish_reason "tool_calls" when it called tools (and was not cut off).
std::string finish_text(const schemas::done_event& done, bool called) {
  return called && done.reason == finish_reason::stop ? "tool_calls" : to_string(done.reason);
}

// The message of a tool chat: content (null when it only called tools), reasoning, calls.
json turn_message(const schemas::chat_turn& t) {
  json m = {{"role", "assistant"}, {"content", t.content.empty() && !t.tool_calls.empty() ? json(nullptr) : json(t.content)}};
  if (!t.reasoning.empty()) m["reasoning_content"] = t.reasoning;
  if (t.tool_calls.empty()) return m;
  m["tool_calls"] = json::array();
  for (const auto& c : t.tool_calls)
    m["tool_calls"].push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return m;
}

} // namespace

std::string render_completion(const openai_context& c, const std::vector<choice_events>& choices) {
  json all = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& [tokens, done, turn] = choices[i];
    json choice = {{"index", i}, {"finish_reason", finish_text(done, turn && !turn->tool_calls.empty())}};
    json logprobs = nullptr;
    if (is_chat(c)) {
      choice["message"] = {{"role", "assistant"}, {"content", done.text}};
      if (turn) {
        choice["message"] = turn_message(*turn);
      } else if (c.reasoning != reasoning_parser::none) {
        const reasoning_split s = split_reasoning(c.reasoning, done.text);
        choice["message"]["reasoning_content"] = s.reasoning.empty() ? json(nullptr) : json(s.reasoning);
        choice["message"]["content"] = s.content.empty() && !s.reasoning.empty() ? json(nullptr) : json(s.content);
      }
      if (c.req->logprobs) {
        json content = json::array();
        for (const auto& ev : tokens) chat_logprobs(c, ev, content);
        logprobs = {{"content", content}};
      }
    } else {
      std::string text = done.text;
      size_t offset = 0;
      if (c.req->logprobs) logprobs = empty_completion_logprobs();
      if (c.req->echo) {  // the prompt's scores ride in the first tokens event that has them
        const auto scored = std::find_if(tokens.begin(), tokens.end(), [](const schemas::tokens_event& ev) { return ev.prompt.has_value(); });
        offset = echo_prompt(c, scored == tokens.end() ? schemas::tokens_event{} : *scored, text, c.req->logprobs ? &logprobs : nullptr);
      }
      choice["text"] = std::move(text);
      if (c.req->logprobs)
        for (const auto& ev : tokens) completion_logprobs(c, ev, logprobs, offset);
    }
    choice["logprobs"] = logprobs;
    all.push_back(std::move(choice));
  }
  json body = {{"id", response_id(c)}, {"object", is_chat(c) ? "chat.completion" : "text_completion"},
               {"created", c.created}, {"model", c.req->model},
               {"choices", std::move(all)}, {"usage", usage(choices, &done_of_choice)}};
  return dump(body);
}

std::string render_chunk_start(const openai_context& c) {
  if (!is_chat(c)) {  // an echo without logprobs comes first; with them, in the first tokens chunk
    if (!c.req->echo || c.req->logprobs || c.req->echo_text.empty()) return {};
    json j = chunk_head(c);
    j["choices"] = json::array({{{"index", c.index}, {"text", c.req->echo_text}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    return sse(j);
  }
  json j = chunk_head(c);
  j["choices"] = json::array({{{"index", c.index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return sse(j);
}

std::string render_chunk_tokens(const openai_context& c, const schemas::tokens_event& ev, const reasoning_split* split) {
  const bool nothing = split && is_chat(c) ? split->reasoning.empty() && split->content.empty() : ev.text.empty();
  if (nothing && !c.req->logprobs) return {};
  json choice = {{"index", c.index}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
  if (is_chat(c)) {
    choice["delta"] = {{"content", ev.text}};
    if (split) {
      choice["delta"] = json::object();
      if (!split->reasoning.empty()) choice["delta"]["reasoning_content"] = split->reasoning;
      if (!split->content.empty() || split->reasoning.empty()) choice["delta"]["content"] = split->content;
    }
    if (c.req->logprobs) {
      json content = json::array();
      chat_logprobs(c, ev, content);
      choice["logprobs"] = {{"content", content}};
    }
  } else {
    std::string text = ev.text;
    json lp = c.req->logprobs ? empty_completion_logprobs() : json(nullptr);
    size_t offset = 0;
    if (c.req->echo && ev.prompt) offset = echo_prompt(c, ev, text, c.req->logprobs ? &lp : nullptr);
    choice["text"] = std::move(text);
    if (c.req->logprobs) {
      completion_logprobs(c, ev, lp, offset);
      choice["logprobs"] = lp;
    }
  }
  json j = chunk_head(c);
  j["choices"] = json::array({choice});
  return sse(j);
}

std::string render_chunk_turn(const openai_context& c, const schemas::tokens_event& ev, const std::vector<schemas::chat_turn_delta>& deltas) {
  json delta = json::object();
  std::string content, reasoning;
  for (const auto& d : deltas) {
    content += d.content;
    reasoning += d.reasoning;
    if (d.tool_index < 0) continue;
    json call = {{"index", d.tool_index}, {"function", {{"arguments", d.call.arguments}}}};
    if (!d.call.id.empty()) call["id"] = d.call.id;
    if (!d.call.id.empty() || !d.call.name.empty()) call["type"] = "function";
    if (!d.call.name.empty()) call["function"]["name"] = d.call.name;
    delta["tool_calls"].push_back(std::move(call));
  }
  if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
  if (!content.empty()) delta["content"] = content;
  if (delta.empty() && !c.req->logprobs) return {};
  json choice = {{"index", c.index}, {"finish_reason", nullptr}, {"logprobs", nullptr}, {"delta", delta}};
  if (c.req->logprobs) {
    json lp = json::array();
    chat_logprobs(c, ev, lp);
    choice["logprobs"] = {{"content", lp}};
  }
  json j = chunk_head(c);
  j["choices"] = json::array({choice});
  return sse(j);
}

std::string render_chunk_finish(const openai_context& c, const schemas::done_event& done, bool called_tools) {
  json choice = {{"index", c.index}, {"finish_reason", finish_text(done, called_tools)}, {"logprobs", nullptr}};
  if (is_chat(c)) choice["delta"] = json::object();
  else choice["text"] = "";
  json j = chunk_head(c);
  j["choices"] = json::array({choice});
  return sse(j);
}

std::string render_stream_end(const openai_context& c, const std::vector<schemas::done_event>& done) {
  std::string out;
  if (c.req->include_usage) {
    json u = chunk_head(c);
    u["choices"] = json::array();
    u["usage"] = usage(done, &itself);
    out += sse(u);
  }
  return out + "data: [DONE]\n\n";
}

std::string render_chunk_error(const openai_error& e) { return "data: " + to_json(e) + "\n\n" + "data: [DONE]\n\n"; }

} // namespace conveyor::transport
