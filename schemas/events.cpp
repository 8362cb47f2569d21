#include "schemas/events.hpp"

#include "schemas/pack.hpp"

namespace conveyor::schemas {

using detail::map_packer;

namespace {

// The three keys every job event starts with.
map_packer& head(map_packer& p, uint32_t num_keys, const std::string& id, uint64_t seq,
                 const char* kind) {
  return p.map(num_keys).kv("id", id).kv("seq", seq).kv("kind", kind);
}

wire_bytes encode_map(const accepted_event& e) {
  map_packer p;
  head(p, 3, e.id, e.seq, "accepted");
  return p.take();
}

void pack_alternatives(map_packer& p, const std::vector<token_logprob>& alts) {
  p.pk().pack_array(static_cast<uint32_t>(alts.size()));
  for (const auto& a : alts) {
    p.pk().pack_array(2);
    p.pk().pack(a.token);
    p.f64(a.logprob);
  }
}

// "prompt_token_ids", "prompt_logprobs" and "prompt_top_logprobs": the lists nil first.
void pack_prompt(map_packer& p, const prompt_scores& s) {
  p.str("prompt_token_ids").array(static_cast<uint32_t>(s.token_ids.size()));
  for (token_id t : s.token_ids) p.pk().pack(t);
  const auto n = static_cast<uint32_t>(s.token_ids.size());
  p.str("prompt_logprobs").array(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (i == 0 || i > s.logprobs.size()) p.pk().pack_nil();
    else p.f64(s.logprobs[i - 1]);
  }
  if (!s.top) return;
  p.str("prompt_top_logprobs").array(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (i == 0 || i > s.top->size()) p.pk().pack_nil();
    else pack_alternatives(p, (*s.top)[i - 1]);
  }
}

wire_bytes encode_map(const tokens_event& e) {
  map_packer p;
  const uint32_t prompt_keys = e.prompt ? (e.prompt->top ? 3 : 2) : 0;
  const uint32_t byte_keys = (e.token_bytes ? 1 : 0) + (e.top_bytes ? 1 : 0);
  head(p, 5 + (e.logprobs ? 1 : 0) + (e.top_logprobs ? 1 : 0) + prompt_keys + byte_keys, e.id, e.seq, "tokens");
  p.str("token_ids").array(static_cast<uint32_t>(e.token_ids.size()));
  for (token_id t : e.token_ids) p.pk().pack(t);
  p.kv("text", e.text);
  if (e.logprobs) {
    p.str("logprobs").array(static_cast<uint32_t>(e.logprobs->size()));
    for (float lp : *e.logprobs) p.f64(lp);
  }
  if (e.top_logprobs) {
    p.str("top_logprobs").array(static_cast<uint32_t>(e.top_logprobs->size()));
    for (const auto& alts : *e.top_logprobs) pack_alternatives(p, alts);
  }
  if (e.prompt) pack_prompt(p, *e.prompt);
  if (e.token_bytes) {
    p.str("token_bytes").array(static_cast<uint32_t>(e.token_bytes->size()));
    for (const auto& b : *e.token_bytes) p.bin(b);
  }
  if (e.top_bytes) {
    p.str("top_logprobs_bytes").array(static_cast<uint32_t>(e.top_bytes->size()));
    for (const auto& alts : *e.top_bytes) {
      p.pk().pack_array(static_cast<uint32_t>(alts.size()));
      for (const auto& b : alts) p.bin(b);
    }
  }
  return p.take();
}

wire_bytes encode_map(const done_event& e) {
  map_packer p;
  head(p, 7, e.id, e.seq, "done").kv("finish_reason", to_string(e.reason)).kv("text", e.text);
  p.str("usage").map(3).kv("prompt_tokens", e.usage.prompt_tokens);
  p.kv("completion_tokens", e.usage.completion_tokens).kv("cached_tokens", e.usage.cached_tokens);
  p.str("timing").map(3).kv("queue_ms", e.timing.queue_ms).str("ttft_ms");
  if (e.timing.ttft_ms) p.f64(*e.timing.ttft_ms);
  else p.pk().pack_nil();
  p.kv("e2e_ms", e.timing.e2e_ms);
  return p.take();
}

wire_bytes encode_map(const error_event& e) {
  map_packer p;
  head(p, 5, e.id, e.seq, "error").kv("code", to_string(e.code)).kv("message", e.message);
  return p.take();
}

} // namespace

const std::string& job_id_of(const job_event& event) {
  return std::visit([](const auto& e) -> const std::string& { return e.id; }, event);
}

uint64_t seq_of(const job_event& event) {
  return std::visit([](const auto& e) { return e.seq; }, event);
}

bool is_terminal(const job_event& event) {
  return std::holds_alternative<done_event>(event) || std::holds_alternative<error_event>(event);
}

void published_event::drop_typed_payload() {
  if (auto* t = std::get_if<tokens_event>(&event)) *t = tokens_event{std::move(t->id), t->seq, {}, {}, {}, {}, {}, {}, {}};
  else if (auto* d = std::get_if<done_event>(&event)) d->text = std::string();
}

wire_bytes encode(const job_event& event) {
  return std::visit([](const auto& e) { return encode_map(e); }, event);
}

wire_bytes encode(const heartbeat_event& e) {
  map_packer p;
  p.map(9).kv("kind", "heartbeat").kv("seq", e.seq).kv("ts", e.ts);
  p.kv("status", to_string(e.status)).kv("protocol", protocol_version);
  p.kv("running", e.running).kv("waiting", e.waiting).kv("kv_usage", e.kv_usage);
  p.kv("tokens_per_s", e.tokens_per_s);
  return p.take();
}

} // namespace conveyor::schemas
