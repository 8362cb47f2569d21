#include "schemas/replies.hpp"

#include "schemas/pack.hpp"

namespace conveyor::schemas {

using detail::map_packer;

namespace {

/// {"ok": true, "id": id, key: value}: a reply that tells one thing about one job.
template <class V>
wire_bytes ok_about_job(const std::string& id, const char* key, const V& value) {
  map_packer p;
  p.map(3).kv("ok", true).kv("id", id).kv(key, value);
  return p.take();
}

wire_bytes encode_map(const submit_reply& reply) { return ok_about_job(reply.id, "topic", topic_for(reply.id)); }

wire_bytes encode_map(const error_reply& reply) {
  map_packer p;
  p.map(reply.id.empty() ? 2 : 3).kv("ok", false);
  if (!reply.id.empty()) p.kv("id", reply.id);
  p.str("error").map(reply.field.empty() ? 2 : 3);
  p.kv("code", to_string(reply.code)).kv("message", reply.message);
  if (!reply.field.empty()) p.kv("field", reply.field);
  return p.take();
}

wire_bytes encode_map(const cancel_reply& reply) { return ok_about_job(reply.id, "state", to_string(reply.state)); }

wire_bytes encode_map(const status_reply& reply) {
  map_packer p;
  p.map(reply.reason ? 7 : 6).kv("ok", true).kv("id", reply.id);
  p.kv("state", to_string(reply.state)).kv("prompt_tokens", reply.prompt_tokens);
  p.kv("completion_tokens", reply.completion_tokens).kv("next_seq", reply.next_seq);
  if (reply.reason) p.kv("finish_reason", to_string(*reply.reason));
  return p.take();
}

wire_bytes encode_map(const fetch_reply& reply) {
  map_packer p;
  p.map(4).kv("ok", true).kv("id", reply.id);
  p.str("events").array(static_cast<uint32_t>(reply.events.size()));
  for (const wire_bytes& event : reply.events) p.raw(event.data(), event.size());
  p.kv("complete", reply.complete);
  return p.take();
}

wire_bytes encode_map(const stats_reply& r) {
  const serving_stats& s = r.serving;
  map_packer p;
  p.map(22).kv("ok", true).kv("queued", s.queued).kv("running", s.running);
  p.kv("kv_usage", s.kv_usage).kv("kv_blocks_used", s.kv_blocks_used);
  p.kv("kv_blocks_total", s.kv_blocks_total).kv("prompt_tokens_total", s.prompt_tokens_total);
  p.kv("completion_tokens_total", s.completion_tokens_total);
  p.kv("cached_tokens_total", s.cached_tokens_total).kv("jobs_accepted", s.jobs_accepted);
  p.kv("jobs_rejected", r.jobs_rejected).kv("jobs_finished", s.jobs_finished);
  p.kv("jobs_failed", r.jobs_failed).kv("tokens_per_s", s.tokens_per_s);
  p.kv("uptime_s", r.uptime_s).kv("preemptions_total", s.preemptions_total);
  p.kv("spec_drafts_total", s.spec_drafts_total).kv("spec_draft_tokens_total", s.spec_draft_tokens_total);
  p.kv("spec_accepted_tokens_total", s.spec_accepted_tokens_total);
  p.str("rejected").map(static_cast<uint32_t>(r.rejected.size()));
  for (const auto& [code, n] : r.rejected) p.kv(code, n);
  p.str("finished").map(static_cast<uint32_t>(r.finished.size()));
  for (const auto& [reason, n] : r.finished) p.kv(reason, n);
  p.str("histograms").map(static_cast<uint32_t>(r.histograms.size()));
  for (const auto& h : r.histograms) p.str(h.name).map(2).kv("count", h.count).kv("sum", h.sum);
  return p.take();
}

wire_bytes encode_map(const health_reply& reply) {
  map_packer p;
  p.map(4).kv("ok", true).kv("status", to_string(reply.status));
  p.kv("protocol", protocol_version).kv("model", reply.model);
  return p.take();
}

} // namespace

wire_bytes encode(const reply& r) {
  return std::visit([](const auto& x) { return encode_map(x); }, r);
}

error_reply to_reply(const decode_error& error) {
  return error_reply{error.id, error.code, error.message, error.field};
}

} // namespace conveyor::schemas
