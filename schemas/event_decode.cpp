// The wire codec's reader of job events: what the journal, JetStream and `fetch` hand back is
// turned into the typed schemas::job_event here, and nowhere else.
#include <msgpack.hpp>

#include "schemas/events.hpp"

namespace conveyor::schemas {
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

std::string_view view(const msgpack::object& o) { return {o.via.str.ptr, o.via.str.size}; }

void read_str(const msgpack::object& map, std::string_view key, std::string& out) {
  if (const msgpack::object* v = find(map, key); v && v->type == msgpack::type::STR) out.assign(v->via.str.ptr, v->via.str.size);
}

template <class T>
void read_num(const msgpack::object& map, std::string_view key, T& out) {
  if (const msgpack::object* v = find(map, key); v && v->type != msgpack::type::NIL) out = v->as<T>();
}

// A bin (or str) value's bytes.
std::string bytes_of(const msgpack::object& o) {
  if (o.type == msgpack::type::BIN) return std::string(o.via.bin.ptr, o.via.bin.size);
  if (o.type == msgpack::type::STR) return std::string(o.via.str.ptr, o.via.str.size);
  throw msgpack::type_error();
}

std::vector<token_logprob> read_alternatives(const msgpack::object& o) {
  std::vector<token_logprob> alts;
  for (const auto& [t, lp] : o.as<std::vector<std::pair<token_id, float>>>()) alts.push_back({t, lp});
  return alts;
}

// prompt_token_ids with prompt_logprobs (nil first) and maybe prompt_top_logprobs (nil first).
std::optional<prompt_scores> read_prompt(const msgpack::object& o) {
  const msgpack::object* ids = find(o, "prompt_token_ids");
  const msgpack::object* lps = find(o, "prompt_logprobs");
  if (!ids || !lps || lps->type != msgpack::type::ARRAY) return std::nullopt;
  prompt_scores s;
  s.token_ids = ids->as<std::vector<token_id>>();
  for (uint32_t i = 1; i < lps->via.array.size; ++i) s.logprobs.push_back(lps->via.array.ptr[i].as<float>());
  if (const msgpack::object* top = find(o, "prompt_top_logprobs"); top && top->type == msgpack::type::ARRAY) {
    s.top.emplace();
    for (uint32_t i = 1; i < top->via.array.size; ++i) s.top->push_back(read_alternatives(top->via.array.ptr[i]));
  }
  return s;
}

std::optional<job_event> read_tokens(const msgpack::object& o, tokens_event ev) {
  const msgpack::object* ids = find(o, "token_ids");
  if (!ids) return std::nullopt;
  ev.token_ids = ids->as<std::vector<token_id>>();
  read_str(o, "text", ev.text);
  if (const msgpack::object* lp = find(o, "logprobs")) ev.logprobs = lp->as<std::vector<float>>();
  if (const msgpack::object* top = find(o, "top_logprobs"); top && top->type == msgpack::type::ARRAY) {
    ev.top_logprobs.emplace();
    for (uint32_t i = 0; i < top->via.array.size; ++i) ev.top_logprobs->push_back(read_alternatives(top->via.array.ptr[i]));
  }
  ev.prompt = read_prompt(o);
  if (const msgpack::object* b = find(o, "token_bytes"); b && b->type == msgpack::type::ARRAY) {
    ev.token_bytes.emplace();
    for (uint32_t i = 0; i < b->via.array.size; ++i) ev.token_bytes->push_back(bytes_of(b->via.array.ptr[i]));
  }
  if (const msgpack::object* b = find(o, "top_logprobs_bytes"); b && b->type == msgpack::type::ARRAY) {
    ev.top_bytes.emplace();
    for (uint32_t i = 0; i < b->via.array.size; ++i) {
      std::vector<std::string>& alts = ev.top_bytes->emplace_back();
      const msgpack::object& a = b->via.array.ptr[i];
      if (a.type != msgpack::type::ARRAY) throw msgpack::type_error();
      for (uint32_t k = 0; k < a.via.array.size; ++k) alts.push_back(bytes_of(a.via.array.ptr[k]));
    }
  }
  return ev;
}

std::optional<job_event> read_done(const msgpack::object& o, done_event ev) {
  const msgpack::object* r = find(o, "finish_reason");
  if (!r || r->type != msgpack::type::STR) return std::nullopt;
  auto reason = reason_from(view(*r));
  if (!reason) return std::nullopt;
  ev.reason = *reason;
  read_str(o, "text", ev.text);
  if (const msgpack::object* u = find(o, "usage")) {
    read_num(*u, "prompt_tokens", ev.usage.prompt_tokens);
    read_num(*u, "completion_tokens", ev.usage.completion_tokens);
    read_num(*u, "cached_tokens", ev.usage.cached_tokens);
  }
  if (const msgpack::object* t = find(o, "timing")) {
    read_num(*t, "queue_ms", ev.timing.queue_ms);
    if (const msgpack::object* v = find(*t, "ttft_ms"); v && v->type != msgpack::type::NIL) ev.timing.ttft_ms = v->as<double>();
    read_num(*t, "e2e_ms", ev.timing.e2e_ms);
  }
  return ev;
}

std::optional<job_event> read_event(const msgpack::object& o) {
  const msgpack::object* kind = find(o, "kind");
  const msgpack::object* seq = find(o, "seq");
  if (!kind || kind->type != msgpack::type::STR || !seq) return std::nullopt;
  std::string id;
  read_str(o, "id", id);
  const uint64_t n = seq->as<uint64_t>();
  const std::string_view k = view(*kind);
  if (k == "accepted") return accepted_event{std::move(id), n};
  if (k == "tokens") return read_tokens(o, tokens_event{std::move(id), n, {}, {}, {}, {}, {}, {}, {}});
  if (k == "done") return read_done(o, done_event{std::move(id), n, finish_reason::stop, {}, {}, {}});
  if (k != "error") return std::nullopt;
  error_event ev{std::move(id), n, error_code::internal, {}};
  std::string code;
  read_str(o, "code", code);
  ev.code = error_code_from_string(code).value_or(error_code::internal);
  read_str(o, "message", ev.message);
  return ev;
}

} // namespace

std::optional<job_event> decode_event(std::span<const uint8_t> bytes) {
  try {
    // Bounded as the request decoder is (msgpack-c trusts lengths otherwise): stored events
    // are at most a few MB, their arrays at most a step's tokens.
    const msgpack::unpack_limit limit(1u << 20, 64, 1u << 26, 1u << 26, 1u << 26, 8);
    msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size(), nullptr, nullptr, limit);
    return read_event(h.get());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

} // namespace conveyor::schemas
