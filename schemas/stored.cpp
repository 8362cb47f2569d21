// The journal's encodings: the submit map (mirror of decode.cpp's fields) and the event reader.
#include "schemas/stored.hpp"

#include <msgpack.hpp>

#include "schemas/pack.hpp"

namespace conveyor::schemas {

using detail::map_packer;

wire_bytes encode(const submit_request& j) {
  map_packer p;
  const uint32_t n = 16 + (j.seed ? 1 : 0) + (j.deadline_ms ? 1 : 0) + (j.format ? 1 : 0);
  p.map(n).kv("op", "submit").kv("id", j.id);
  if (auto* text = std::get_if<std::string>(&j.input)) {
    p.kv("prompt", *text);
  } else if (auto* msgs = std::get_if<std::vector<chat_message>>(&j.input)) {
    p.str("messages").array(static_cast<uint32_t>(msgs->size()));
    for (const auto& m : *msgs) p.map(2).kv("role", m.role).kv("content", m.content);
  } else {
    const auto& ids = std::get<std::vector<token_id>>(j.input);
    p.str("prompt_tokens").array(static_cast<uint32_t>(ids.size()));
    for (token_id t : ids) p.pk().pack(t);
  }
  p.kv("max_tokens", j.max_tokens).kv("temperature", double{j.temperature}).kv("top_p", double{j.top_p});
  p.kv("top_k", j.top_k).kv("min_p", double{j.min_p});
  if (j.seed) p.kv("seed", *j.seed);
  p.str("stop").array(static_cast<uint32_t>(j.stop.size()));
  for (const auto& s : j.stop) p.str(s);
  p.str("stop_token_ids").array(static_cast<uint32_t>(j.stop_token_ids.size()));
  for (token_id t : j.stop_token_ids) p.pk().pack(t);
  p.kv("ignore_eos", j.ignore_eos).kv("min_tokens", j.min_tokens).kv("priority", j.priority);
  if (j.deadline_ms) p.kv("deadline_ms", *j.deadline_ms);
  p.kv("logprobs", j.logprobs).kv("top_logprobs", j.top_logprobs).kv("stream", j.stream);
  if (j.format) {
    const bool has_spec = j.format->type != response_format::kind::json_object;
    p.str("response_format").map(has_spec ? 2 : 1).kv("type", to_string(j.format->type));
    if (j.format->type == response_format::kind::json_schema) p.kv("schema", j.format->spec);
    if (j.format->type == response_format::kind::regex) p.kv("pattern", j.format->spec);
    if (j.format->type == response_format::kind::grammar) p.kv("grammar", j.format->spec);
  }
  return p.take();
}

namespace {

const msgpack::object* find(const msgpack::object& map, std::string_view key) {
  if (map.type != msgpack::type::MAP) return nullptr;
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key) return &kv.val;
  }
  return nullptr;
}

std::optional<finish_reason> reason_from(std::string_view s) {
  for (auto r : {finish_reason::stop, finish_reason::length, finish_reason::cancelled, finish_reason::deadline})
    if (s == to_string(r)) return r;
  return std::nullopt;
}

// One event map (corrupt or unknown: nullopt).
std::optional<event_summary> summarize_object(const msgpack::object& o) {
  event_summary s;
  const msgpack::object* kind = find(o, "kind");
  const msgpack::object* seq = find(o, "seq");
  if (!kind || kind->type != msgpack::type::STR || !seq) return std::nullopt;
  s.kind.assign(kind->via.str.ptr, kind->via.str.size);
  s.seq = seq->as<uint64_t>();
  const auto str = [&o](std::string_view key, std::string& out) {
    if (const msgpack::object* v = find(o, key); v && v->type == msgpack::type::STR) out.assign(v->via.str.ptr, v->via.str.size);
  };
  if (s.kind == "tokens") {
    const msgpack::object* ids = find(o, "token_ids");
    if (!ids) return std::nullopt;
    s.token_ids = ids->as<std::vector<token_id>>();
    str("text", s.text);
    if (const msgpack::object* lp = find(o, "logprobs")) s.logprobs = lp->as<std::vector<float>>();
    if (const msgpack::object* top = find(o, "top_logprobs"); top && top->type == msgpack::type::ARRAY) {
      for (uint32_t i = 0; i < top->via.array.size; ++i) {
        std::vector<token_logprob> alts;
        for (const auto& pair : top->via.array.ptr[i].as<std::vector<std::pair<token_id, float>>>()) alts.push_back({pair.first, pair.second});
        s.top_logprobs.push_back(std::move(alts));
      }
    }
  } else if (s.kind == "error") {
    str("code", s.error_code);
    str("message", s.message);
  } else if (s.kind == "done") {
    str("text", s.text);
    const msgpack::object* r = find(o, "finish_reason");
    if (!r || r->type != msgpack::type::STR) return std::nullopt;
    s.reason = reason_from(std::string_view(r->via.str.ptr, r->via.str.size));
    if (!s.reason) return std::nullopt;
    if (const msgpack::object* u = find(o, "usage")) {
      if (const auto* p = find(*u, "prompt_tokens")) s.prompt_tokens = p->as<int64_t>();
      if (const auto* c = find(*u, "completion_tokens")) s.completion_tokens = c->as<int64_t>();
      if (const auto* c = find(*u, "cached_tokens")) s.cached_tokens = c->as<int64_t>();
    }
  } else if (s.kind != "accepted") {
    return std::nullopt;
  }
  return s;
}

} // namespace

std::optional<event_summary> summarize_event(std::span<const uint8_t> event) {
  try {
    // Bounded as the request decoder is (msgpack-c trusts lengths otherwise): stored events
    // are at most a few MB, their arrays at most a step's tokens.
    const msgpack::unpack_limit limit(1u << 20, 64, 1u << 26, 1u << 26, 1u << 26, 8);
    msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(event.data()), event.size(), nullptr, nullptr, limit);
    return summarize_object(h.get());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<fetch_summary> summarize_fetch_reply(std::span<const uint8_t> reply) {
  try {
    const msgpack::unpack_limit limit(1u << 20, 64, 1u << 28, 1u << 28, 1u << 28, 10);
    msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(reply.data()), reply.size(), nullptr, nullptr, limit);
    const msgpack::object* events = find(h.get(), "events");
    const msgpack::object* complete = find(h.get(), "complete");
    if (!events || events->type != msgpack::type::ARRAY || !complete || complete->type != msgpack::type::BOOLEAN) return std::nullopt;
    fetch_summary f;
    f.complete = complete->via.boolean;
    for (uint32_t i = 0; i < events->via.array.size; ++i) {
      auto ev = summarize_object(events->via.array.ptr[i]);
      if (!ev) return std::nullopt;
      f.events.push_back(std::move(*ev));
    }
    return f;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}


std::optional<reply_summary> summarize_reply(std::span<const uint8_t> reply) {
  try {
    const msgpack::unpack_limit limit(1u << 16, 64, 1u << 26, 1u << 26, 1u << 26, 8);
    msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(reply.data()), reply.size(), nullptr, nullptr, limit);
    const msgpack::object& o = h.get();
    const msgpack::object* ok = find(o, "ok");
    if (!ok || ok->type != msgpack::type::BOOLEAN) return std::nullopt;
    reply_summary r;
    r.ok = ok->via.boolean;
    if (r.ok) {
      if (const msgpack::object* state = find(o, "state"); state && state->type == msgpack::type::STR)
        r.state.assign(state->via.str.ptr, state->via.str.size);
      return r;
    }
    const msgpack::object* err = find(o, "error");
    if (!err) return std::nullopt;
    const msgpack::object* code = find(*err, "code");
    const msgpack::object* message = find(*err, "message");
    if (!code || code->type != msgpack::type::STR) return std::nullopt;
    r.code.assign(code->via.str.ptr, code->via.str.size);
    if (message && message->type == msgpack::type::STR) r.message.assign(message->via.str.ptr, message->via.str.size);
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

wire_bytes encode_dead_letter(const std::string& job_id, error_code code, const std::string& message, uint64_t deliveries,
                              std::span<const uint8_t> request) {
  map_packer p;
  p.map(4).kv("id", job_id);
  p.str("error").map(2).kv("code", to_string(code)).kv("message", message);
  p.kv("deliveries", deliveries);
  p.str("request");
  p.pk().pack_bin(static_cast<uint32_t>(request.size()));
  p.pk().pack_bin_body(reinterpret_cast<const char*>(request.data()), static_cast<uint32_t>(request.size()));
  return p.take();
}

} // namespace conveyor::schemas
