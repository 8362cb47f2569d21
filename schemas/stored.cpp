// The journal's encodings: the submit map (mirror of decode.cpp's fields) and the dead letter.
#include "schemas/stored.hpp"

#include <msgpack.hpp>

#include "schemas/pack.hpp"

namespace conveyor::schemas {

using detail::map_packer;

wire_bytes encode(const submit_request& j) {
  map_packer p;
  // The penalties and logit_bias only when set: a journal stays readable by a server without them.
  const bool penalties = j.presence_penalty != 0.0f || j.frequency_penalty != 0.0f || j.repetition_penalty != 1.0f;
  const uint32_t n = 16 + (j.seed ? 1 : 0) + (j.deadline_ms ? 1 : 0) + (j.format ? 1 : 0) + (penalties ? 3 : 0) +
                     (j.logit_bias.empty() ? 0 : 1) + (j.chat_template_kwargs.empty() ? 0 : 1) + (j.prompt_logprobs ? 1 : 0) + (j.token_bytes ? 1 : 0) +
                     (j.speculate ? 0 : 1);
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
  if (penalties) {
    p.kv("presence_penalty", double{j.presence_penalty}).kv("frequency_penalty", double{j.frequency_penalty});
    p.kv("repetition_penalty", double{j.repetition_penalty});
  }
  if (!j.logit_bias.empty()) {
    p.str("logit_bias").map(static_cast<uint32_t>(j.logit_bias.size()));
    for (const auto& [t, b] : j.logit_bias) p.pk().pack(t).pack(double{b});
  }
  if (j.seed) p.kv("seed", *j.seed);
  p.str("stop").array(static_cast<uint32_t>(j.stop.size()));
  for (const auto& s : j.stop) p.str(s);
  p.str("stop_token_ids").array(static_cast<uint32_t>(j.stop_token_ids.size()));
  for (token_id t : j.stop_token_ids) p.pk().pack(t);
  p.kv("ignore_eos", j.ignore_eos).kv("min_tokens", j.min_tokens).kv("priority", j.priority);
  if (j.deadline_ms) p.kv("deadline_ms", *j.deadline_ms);
  p.kv("logprobs", j.logprobs).kv("top_logprobs", j.top_logprobs).kv("stream", j.stream);
  if (j.prompt_logprobs) p.kv("prompt_logprobs", *j.prompt_logprobs);
  if (j.token_bytes) p.kv("token_bytes", true);
  if (!j.speculate) p.kv("speculate", false);
  if (!j.chat_template_kwargs.empty()) {
    p.str("chat_template_kwargs").map(static_cast<uint32_t>(j.chat_template_kwargs.size()));
    for (const auto& [key, value] : j.chat_template_kwargs) {
      p.str(key);
      std::visit([&p](const auto& v) {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) p.str(v);
        else p.pk().pack(v);
      }, value);
    }
  }
  if (j.format) {
    const bool has_spec = j.format->type != response_format::kind::json_object;
    p.str("response_format").map(has_spec ? 2 : 1).kv("type", to_string(j.format->type));
    if (j.format->type == response_format::kind::json_schema) p.kv("schema", j.format->spec);
    if (j.format->type == response_format::kind::regex) p.kv("pattern", j.format->spec);
    if (j.format->type == response_format::kind::grammar) p.kv("grammar", j.format->spec);
  }
  return p.take();
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
