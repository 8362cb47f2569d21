#include "tools/bench/wire.hpp"

#include "engine/enum_names.hpp"

namespace conveyor::bench {
namespace {

using packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

std::string take(const msgpack::sbuffer& buf) { return std::string(buf.data(), buf.size()); }

// Strings point into the frame instead of being copied into the zone; views are copied out
// before the frame goes away.
bool reference_strings(msgpack::type::object_type type, std::size_t, void*) { return type == msgpack::type::STR; }

std::string_view str_of(const msgpack::object& o) {
  return o.type == msgpack::type::STR ? std::string_view(o.via.str.ptr, o.via.str.size) : std::string_view();
}

std::optional<int64_t> int_of(const msgpack::object& o) {
  if (o.type == msgpack::type::POSITIVE_INTEGER && o.via.u64 <= static_cast<uint64_t>(INT64_MAX))
    return static_cast<int64_t>(o.via.u64);
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
  return std::nullopt;
}

template <class F> void for_each_pair(const msgpack::object& map, F&& f) {
  for (uint32_t i = 0; i < map.via.map.size; ++i) f(str_of(map.via.map.ptr[i].key), map.via.map.ptr[i].val);
}

// The protocol's event kinds (schemas/protocol.md); any other kind reads as `other`.
constexpr auto kEventKinds = make_enum_names<event_kind>(
    {{event_kind::accepted, "accepted"}, {event_kind::tokens, "tokens"}, {event_kind::done, "done"}, {event_kind::error, "error"}});

std::optional<event_view> event_from(const msgpack::object& o) {
  if (o.type != msgpack::type::MAP) return std::nullopt;
  event_view e;
  bool has_id = false, has_kind = false;
  for_each_pair(o, [&](std::string_view key, const msgpack::object& v) {
    if (key == "id" && v.type == msgpack::type::STR) {
      e.id = str_of(v);
      has_id = true;
    } else if (key == "seq") {
      e.seq = int_of(v).value_or(-1);
    } else if (key == "kind" && v.type == msgpack::type::STR) {
      const std::string_view k = str_of(v);
      has_kind = true;
      e.kind = kEventKinds.parse(k).value_or(event_kind::other);
    } else if (key == "token_ids" && v.type == msgpack::type::ARRAY) {
      e.num_tokens = static_cast<int32_t>(v.via.array.size);
    } else if (key == "finish_reason") {
      e.finish_reason = str_of(v);
    } else if (key == "code") {
      e.error_code = str_of(v);
    } else if (key == "usage" && v.type == msgpack::type::MAP) {
      for_each_pair(v, [&](std::string_view k, const msgpack::object& u) {
        if (k == "prompt_tokens") e.prompt_tokens = int_of(u).value_or(0);
        if (k == "completion_tokens") e.completion_tokens = int_of(u).value_or(0);
      });
    }
  });
  if (!has_id || !has_kind || e.seq < 0) return std::nullopt;
  return e;
}

} // namespace

std::string encode_submit(const bench_request& r, std::string_view id, const submit_settings& s) {
  msgpack::sbuffer buf;
  packer pk(buf);
  const uint32_t n = 5 + (s.seed ? 1 : 0) + (r.force_length ? 2 : 0);
  pk.pack_map(n);
  pack_str(pk, "op");
  pack_str(pk, "submit");
  pack_str(pk, "id");
  pack_str(pk, id);
  if (!r.prompt_tokens.empty()) {
    pack_str(pk, "prompt_tokens");
    pk.pack_array(static_cast<uint32_t>(r.prompt_tokens.size()));
    for (int32_t t : r.prompt_tokens) pk.pack_int32(t);
  } else if (!r.messages.empty()) {
    pack_str(pk, "messages");
    pk.pack_array(static_cast<uint32_t>(r.messages.size()));
    for (const chat_message& m : r.messages) {
      pk.pack_map(2);
      pack_str(pk, "role");
      pack_str(pk, m.role);
      pack_str(pk, "content");
      pack_str(pk, m.content);
    }
  } else {
    pack_str(pk, "prompt");
    pack_str(pk, r.prompt);
  }
  pack_str(pk, "max_tokens");
  pk.pack_int32(r.max_tokens);
  pack_str(pk, "temperature");
  pk.pack_double(s.temperature);
  if (s.seed) {
    pack_str(pk, "seed");
    pk.pack_uint64(*s.seed);
  }
  if (r.force_length) {
    pack_str(pk, "ignore_eos");
    pk.pack_true();
    pack_str(pk, "min_tokens");
    pk.pack_int32(r.max_tokens);
  }
  return take(buf);
}

std::string encode_fetch(std::string_view id, int64_t from_seq, int64_t max_events) {
  msgpack::sbuffer buf;
  packer pk(buf);
  pk.pack_map(4);
  pack_str(pk, "op");
  pack_str(pk, "fetch");
  pack_str(pk, "id");
  pack_str(pk, id);
  pack_str(pk, "from_seq");
  pk.pack_int64(from_seq);
  pack_str(pk, "max_events");
  pk.pack_int64(max_events);
  return take(buf);
}

namespace {

std::string encode_op(const char* op) {
  msgpack::sbuffer buf;
  packer pk(buf);
  pk.pack_map(1);
  pack_str(pk, "op");
  pack_str(pk, op);
  return take(buf);
}

} // namespace

std::string encode_health() { return encode_op("health"); }
std::string encode_stats() { return encode_op("stats"); }

std::optional<event_view> decoder::event(const void* data, size_t size) {
  zone_.clear();
  try {
    return event_from(msgpack::unpack(zone_, static_cast<const char*>(data), size, reference_strings));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<reply_view> decoder::reply(const void* data, size_t size) {
  zone_.clear();
  try {
    const msgpack::object o = msgpack::unpack(zone_, static_cast<const char*>(data), size, reference_strings);
    if (o.type != msgpack::type::MAP) return std::nullopt;
    reply_view r;
    bool has_ok = false;
    for_each_pair(o, [&](std::string_view key, const msgpack::object& v) {
      if (key == "ok" && v.type == msgpack::type::BOOLEAN) {
        r.ok = v.via.boolean;
        has_ok = true;
      } else if (key == "id") {
        r.id = str_of(v);
      } else if (key == "model") {
        r.model = str_of(v);
      } else if (key == "preemptions_total" && v.type == msgpack::type::POSITIVE_INTEGER) {
        r.preemptions_total = static_cast<int64_t>(v.via.u64);
      } else if (key == "spec_drafts_total" && v.type == msgpack::type::POSITIVE_INTEGER) {
        r.spec_drafts_total = static_cast<int64_t>(v.via.u64);
      } else if (key == "spec_draft_tokens_total" && v.type == msgpack::type::POSITIVE_INTEGER) {
        r.spec_draft_tokens_total = static_cast<int64_t>(v.via.u64);
      } else if (key == "spec_accepted_tokens_total" && v.type == msgpack::type::POSITIVE_INTEGER) {
        r.spec_accepted_tokens_total = static_cast<int64_t>(v.via.u64);
      } else if (key == "complete" && v.type == msgpack::type::BOOLEAN) {
        r.complete = v.via.boolean;
      } else if (key == "error" && v.type == msgpack::type::MAP) {
        for_each_pair(v, [&](std::string_view k, const msgpack::object& e) {
          if (k != "code") return;
          r.error_code = str_of(e);
          r.code = parse_error_code(r.error_code);
        });
      } else if (key == "events" && v.type == msgpack::type::ARRAY) {
        for (uint32_t i = 0; i < v.via.array.size; ++i)
          if (auto e = event_from(v.via.array.ptr[i])) r.events.push_back(std::move(*e));
      }
    });
    if (!has_ok) return std::nullopt;
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

} // namespace conveyor::bench
