// decode_request(): bounded msgpack parse, then per-op validation. A refusal inside is thrown as
// detail::refusal and turned into a decode_error here; nothing escapes.
#include <algorithm>
#include <charconv>
#include <limits>
#include <new>

#include "schemas/decode_fields.hpp"
#include "schemas/requests.hpp"

namespace conveyor::schemas {

using detail::field_map;
using detail::refuse;

namespace {

constexpr int64_t int32_min = std::numeric_limits<int32_t>::min();
constexpr int64_t int32_max = std::numeric_limits<int32_t>::max();

std::string read_id(const field_map& f) {
  std::string id;
  if (!f.read("id", id)) refuse("id", "id is required");
  if (!valid_id(id))
    refuse("id", "id must be 1-128 characters of [A-Za-z0-9._:/-]");
  return id;
}

// Reads one sampling float and checks it with sampling_params::validate(), so the ranges live in
// one place (the engine).
float read_sampling(const field_map& f, std::string_view key, float value,
                    float sampling_params::*member) {
  double v = value;
  if (!f.read_number(key, v)) return value;
  sampling_params probe;
  probe.*member = static_cast<float>(v);
  if (std::string why = probe.validate(); !why.empty()) refuse(key, why);
  return probe.*member;
}

// {"<id>" | id: bias, ...}: string keys (as JSON has them) or integer keys; sorted by id.
std::vector<std::pair<token_id, float>> read_logit_bias(const field_map& f) {
  std::vector<std::pair<token_id, float>> out;
  const msgpack::object* o = f.find("logit_bias");
  if (!o) return out;
  if (o->type != msgpack::type::MAP) refuse("logit_bias", "logit_bias must be a map of token id -> bias");
  if (o->via.map.size > max_logit_bias)
    refuse("logit_bias", "logit_bias names " + std::to_string(o->via.map.size) + " tokens; at most " +
                             std::to_string(max_logit_bias) + " are allowed");
  for (uint32_t i = 0; i < o->via.map.size; ++i) {
    const msgpack::object& k = o->via.map.ptr[i].key;
    const msgpack::object& v = o->via.map.ptr[i].val;
    int64_t id = -1;
    if (k.type == msgpack::type::POSITIVE_INTEGER && k.via.u64 <= static_cast<uint64_t>(int32_max)) {
      id = static_cast<int64_t>(k.via.u64);
    } else if (k.type == msgpack::type::STR) {
      id = logit_bias_key(std::string_view(k.via.str.ptr, k.via.str.size));
    }
    if (id < 0) refuse("logit_bias", "logit_bias keys must be token ids (integers >= 0, or such integers as strings)");
    double bias = 0;
    switch (v.type) {
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64: bias = v.via.f64; break;
      case msgpack::type::POSITIVE_INTEGER: bias = static_cast<double>(v.via.u64); break;
      case msgpack::type::NEGATIVE_INTEGER: bias = static_cast<double>(v.via.i64); break;
      default: refuse("logit_bias", "logit_bias: the bias of token " + std::to_string(id) + " must be a number");
    }
    out.emplace_back(static_cast<token_id>(id), logit_bias_value(bias));
  }
  if (std::string why = finish_logit_bias(out); !why.empty()) refuse("logit_bias", why);
  return out;
}

prompt_input read_input(const field_map& f, const decode_limits& limits) {
  int given = (f.find("prompt") ? 1 : 0) + (f.find("messages") ? 1 : 0) +
              (f.find("prompt_tokens") ? 1 : 0);
  if (given != 1)
    refuse("prompt",
           "exactly one of prompt, messages, prompt_tokens is required; got " +
               std::to_string(given));
  if (std::string prompt; f.read("prompt", prompt)) {
    if (prompt.empty()) refuse("prompt", "prompt must not be empty");
    return prompt;
  }
  if (std::vector<token_id> ids; f.read_ints("prompt_tokens", ids, limits.max_array_len, 0, int32_max)) {
    if (ids.empty()) refuse("prompt_tokens", "prompt_tokens must not be empty");
    return ids;
  }
  const msgpack::object& arr = *f.find("messages");
  if (arr.type != msgpack::type::ARRAY)
    refuse("messages", "messages must be an array of {role, content} maps");
  if (arr.via.array.size == 0) refuse("messages", "messages must not be empty");
  if (arr.via.array.size > limits.max_messages)
    refuse("messages", "messages has " + std::to_string(arr.via.array.size) +
                           " entries; at most " + std::to_string(limits.max_messages) + " are allowed");
  std::vector<chat_message> messages;
  for (uint32_t i = 0; i < arr.via.array.size; ++i) {
    field_map m(arr.via.array.ptr[i], "messages[" + std::to_string(i) + "].");
    chat_message msg;
    if (!m.read("role", msg.role)) refuse(m.name("role"), m.name("role") + " is required");
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
      refuse(m.name("role"), m.name("role") + " must be system, user or assistant");
    if (!m.read("content", msg.content)) refuse(m.name("content"), m.name("content") + " is required");
    messages.push_back(std::move(msg));
  }
  return messages;
}

// {"type":"json_object"} | {"type":"json_schema","schema":S} | {"type":"regex","pattern":S} |
// {"type":"grammar","grammar":S}; the texts are checked when the grammar compiles.
response_format read_format(const field_map& f) {
  std::string type;
  if (!f.read("type", type)) refuse(f.name("type"), f.name("type") + " is required: json_object, json_schema, regex or grammar");
  response_format rf;
  const auto need = [&f](std::string_view key, std::string& out) {
    if (!f.read(key, out) || out.empty()) refuse(f.name(key), f.name(key) + " is required (a non-empty string)");
  };
  if (type == "json_object") {
    rf.type = response_format::kind::json_object;
  } else if (type == "json_schema") {
    rf.type = response_format::kind::json_schema;
    need("schema", rf.spec);
  } else if (type == "regex") {
    rf.type = response_format::kind::regex;
    need("pattern", rf.spec);
  } else if (type == "grammar") {
    rf.type = response_format::kind::grammar;
    need("grammar", rf.spec);
  } else {
    refuse(f.name("type"), f.name("type") + " must be json_object, json_schema, regex or grammar");
  }
  return rf;
}

// {"enable_thinking": false, ...}: scalar values only; "messages" is the job's own.
std::vector<std::pair<std::string, std::variant<bool, int64_t, double, std::string>>> read_template_kwargs(const field_map& f) {
  std::vector<std::pair<std::string, std::variant<bool, int64_t, double, std::string>>> out;
  const msgpack::object* o = f.find("chat_template_kwargs");
  if (!o) return out;
  const field_map kw(*o, "chat_template_kwargs.");  // a map of distinct, valid string keys
  for (uint32_t i = 0; i < o->via.map.size; ++i) {
    const msgpack::object& k = o->via.map.ptr[i].key;
    const msgpack::object& v = o->via.map.ptr[i].val;
    std::string key(k.via.str.ptr, k.via.str.size);
    if (key == "messages") refuse(kw.name(key), "chat_template_kwargs may not set messages (send them as messages)");
    switch (v.type) {
      case msgpack::type::BOOLEAN: out.emplace_back(std::move(key), v.via.boolean); break;
      case msgpack::type::NEGATIVE_INTEGER: out.emplace_back(std::move(key), v.via.i64); break;
      case msgpack::type::POSITIVE_INTEGER:
        if (v.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) refuse(kw.name(key), kw.name(key) + " is too large");
        out.emplace_back(std::move(key), static_cast<int64_t>(v.via.u64));
        break;
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64: out.emplace_back(std::move(key), v.via.f64); break;
      case msgpack::type::STR: {
        std::string s(v.via.str.ptr, v.via.str.size);
        if (!detail::valid_utf8(s)) refuse(kw.name(key), kw.name(key) + " must be valid UTF-8");
        out.emplace_back(std::move(key), std::move(s));
        break;
      }
      default: refuse(kw.name(key), kw.name(key) + " must be true/false, a number or a string");
    }
  }
  return out;
}

submit_request read_submit(const field_map& f, const decode_limits& limits) {
  submit_request r;
  r.id = read_id(f);
  r.input = read_input(f, limits);
  int64_t v = 0;
  if (f.read_int("max_tokens", v, 1, int32_max)) r.max_tokens = static_cast<int32_t>(v);
  r.temperature = read_sampling(f, "temperature", r.temperature, &sampling_params::temperature);
  r.top_p = read_sampling(f, "top_p", r.top_p, &sampling_params::top_p);
  r.min_p = read_sampling(f, "min_p", r.min_p, &sampling_params::min_p);
  if (f.read_int("top_k", v, 0, int32_max)) r.top_k = static_cast<int32_t>(v);
  r.presence_penalty = read_sampling(f, "presence_penalty", r.presence_penalty, &sampling_params::presence_penalty);
  r.frequency_penalty = read_sampling(f, "frequency_penalty", r.frequency_penalty, &sampling_params::frequency_penalty);
  r.repetition_penalty = read_sampling(f, "repetition_penalty", r.repetition_penalty, &sampling_params::repetition_penalty);
  r.logit_bias = read_logit_bias(f);
  if (uint64_t seed = 0; f.read_uint("seed", seed)) r.seed = seed;
  f.read_strings("stop", r.stop, limits.max_stop_strings, limits.max_stop_bytes);
  f.read_ints("stop_token_ids", r.stop_token_ids, limits.max_stop_token_ids, 0, int32_max);
  f.read("ignore_eos", r.ignore_eos);
  if (f.read_int("min_tokens", v, int32_min, int32_max)) {
    if (v < 0 || v > r.max_tokens)
      refuse("min_tokens", "min_tokens must be in [0, max_tokens = " +
                               std::to_string(r.max_tokens) + "]");
    r.min_tokens = static_cast<int32_t>(v);
  }
  if (f.read_int("priority", v, int32_min, int32_max)) r.priority = static_cast<int32_t>(v);
  if (f.read_int("deadline_ms", v, 1, std::numeric_limits<int64_t>::max())) r.deadline_ms = v;
  f.read("logprobs", r.logprobs);
  if (f.read_int("top_logprobs", v, 0, max_top_logprobs)) r.top_logprobs = static_cast<int32_t>(v);
  if (r.top_logprobs > 0) r.logprobs = true;
  f.read("stream", r.stream);
  f.read("token_bytes", r.token_bytes);
  f.read("speculate", r.speculate);
  if (f.read_int("prompt_logprobs", v, 0, max_top_logprobs)) {
    if (!r.stream) refuse("prompt_logprobs", "prompt_logprobs needs stream: true (they arrive in the first tokens event)");
    r.prompt_logprobs = static_cast<int32_t>(v);
  }
  if (const msgpack::object* rf = f.find("response_format")) r.format = read_format(field_map(*rf, "response_format."));
  r.chat_template_kwargs = read_template_kwargs(f);
  return r;
}

fetch_request read_fetch(const field_map& f, const decode_limits& limits) {
  fetch_request r;
  r.id = read_id(f);
  int64_t v = 0;
  if (f.read_int("from_seq", v, 0, std::numeric_limits<int64_t>::max()))
    r.from_seq = static_cast<uint64_t>(v);
  if (f.read_int("max_events", v, 1, limits.max_fetch_events)) r.max_events = static_cast<int32_t>(v);
  r.max_events = std::min(r.max_events, limits.max_fetch_events);
  return r;
}

decode_result read_request(const msgpack::object& top, const decode_limits& limits, std::string& id, bool& submit) {
  field_map f(top, "");
  // Remember a valid id early, so later refusals can still be addressed to the job.
  if (std::string maybe; f.find("id") && f.find("id")->type == msgpack::type::STR) {
    f.read("id", maybe);
    if (valid_id(maybe)) id = maybe;
  }
  std::string op;
  if (!f.read("op", op)) refuse("op", "op is required");
  submit = op == "submit";
  if (submit) return read_submit(f, limits);
  if (op == "cancel") return cancel_request{read_id(f)};
  if (op == "status") return status_request{read_id(f)};
  if (op == "fetch") return read_fetch(f, limits);
  if (op == "stats") return stats_request{};
  if (op == "health") return health_request{};
  // Echo the op only when it is short printable ASCII: replies are UTF-8 and stay small.
  const bool printable = op.size() <= 32 && std::all_of(op.begin(), op.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  refuse("op", (printable ? "unknown op \"" + op + "\"" : std::string("unknown op")) +
                   "; expected submit, cancel, status, fetch, stats or health");
}

} // namespace

decode_result decode_request(std::span<const uint8_t> frame, const decode_limits& limits) {
  std::string id;
  bool submit = false;
  try {
    if (frame.size() > limits.max_message_bytes)
      return decode_error{error_code::too_long, "",
                          "the message is " + std::to_string(frame.size()) +
                              " bytes; the limit is " + std::to_string(limits.max_message_bytes),
                          ""};
    if (frame.empty()) return decode_error{error_code::bad_request, "", "the message is empty", ""};
    msgpack::unpack_limit bounds(limits.max_array_len, limits.max_map_len, limits.max_str_bytes,
                                 limits.max_str_bytes, 0, limits.max_depth);
    std::size_t offset = 0;
    msgpack::object_handle handle;
    try {
      handle = msgpack::unpack(reinterpret_cast<const char*>(frame.data()), frame.size(), offset,
                               nullptr, nullptr, bounds);
    } catch (const msgpack::size_overflow& e) {
      return decode_error{error_code::bad_request, "",
                          std::string("the message exceeds a decoding limit (") + e.what() + ")", ""};
    } catch (const msgpack::unpack_error& e) {
      return decode_error{error_code::bad_request, "",
                          std::string("the message is not valid msgpack (") + e.what() + ")", ""};
    }
    if (offset != frame.size())
      return decode_error{error_code::bad_request, "",
                          std::to_string(frame.size() - offset) +
                              " trailing bytes after the first msgpack object",
                          ""};
    return read_request(handle.get(), limits, id, submit);
  } catch (const detail::refusal& r) {
    return decode_error{r.code, r.field, r.message, id, submit};
  } catch (const std::bad_alloc&) {
    return decode_error{error_code::too_long, "", "the message needs too much memory to decode", id, submit};
  } catch (const std::exception& e) {
    return decode_error{error_code::internal, "", std::string("decoder failure: ") + e.what(), id, submit};
  }
}

int64_t logit_bias_key(std::string_view key) {
  int64_t id = -1;
  const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
  return ec != std::errc() || end != key.data() + key.size() || key.empty() || id < 0 || id > int32_max ? -1 : id;
}

float logit_bias_value(double bias) { return static_cast<float>(std::clamp(bias, -1e9, 1e9)); }

std::string finish_logit_bias(std::vector<std::pair<token_id, float>>& entries) {
  std::sort(entries.begin(), entries.end());
  sampling_params probe;  // the ranges and the distinct ids are the engine's rule
  probe.logit_bias = entries;
  return probe.validate();
}

const char* to_string(response_format::kind k) {
  switch (k) {
    case response_format::kind::json_object: return "json_object";
    case response_format::kind::json_schema: return "json_schema";
    case response_format::kind::regex: return "regex";
    case response_format::kind::grammar: return "grammar";
  }
  return "json_object";
}

sampling_params submit_request::to_sampling_params(uint64_t fallback_seed) const {
  sampling_params p;
  p.temperature = temperature;
  p.top_p = top_p;
  p.top_k = top_k;
  p.min_p = min_p;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  p.repetition_penalty = repetition_penalty;
  p.logit_bias = logit_bias;
  p.seed = seed.value_or(fallback_seed);
  p.top_logprobs = top_logprobs;
  p.logprobs = logprobs || top_logprobs > 0;
  return p;
}

stop_params submit_request::to_stop_params(std::vector<token_id> eos_token_ids) const {
  stop_params p;
  p.max_tokens = max_tokens;
  p.min_tokens = min_tokens;
  p.eos_token_ids = std::move(eos_token_ids);
  p.stop_token_ids = stop_token_ids;
  p.ignore_eos = ignore_eos;
  return p;
}

} // namespace conveyor::schemas
