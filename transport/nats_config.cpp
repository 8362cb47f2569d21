#include "transport/nats_config.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor::transport {
namespace {

// A subject (or prefix) of literal tokens: no wildcard, no empty token, no whitespace.
bool literal_subject(const std::string& s) {
  if (s.empty() || s.front() == '.' || s.back() == '.' || s.find("..") != std::string::npos) return false;
  for (char c : s)
    if (c == '*' || c == '>' || c == ' ' || c == '\t' || c == '\r' || c == '\n') return false;
  return true;
}

bool stream_name(const std::string& s) {
  if (s.empty() || s.size() > 255) return false;
  for (char c : s)
    if (c == '.' || c == '*' || c == '>' || c == ' ' || c == '/' || c == '\\' || c == '\t') return false;
  return true;
}

} // namespace

std::string nats_config::validate() const {
  if (!enabled()) return {};
  for (size_t at = 0; at <= url.size();) {
    const size_t comma = std::min(url.find(',', at), url.size());
    const std::string one = url.substr(at, comma - at);
    if (one.rfind("nats://", 0) != 0 && one.rfind("tls://", 0) != 0)
      return "--nats: '" + one + "' is not a NATS URL; write nats://HOST:4222 (a cluster: comma-separated, no spaces)";
    at = comma + 1;
  }
  for (const auto* s : {&jobs_stream, &events_stream, &dead_stream})
    if (!stream_name(*s)) return "NATS stream name '" + *s + "' is not valid: no '.', '*', '>', '/' or spaces";
  if (consumer.empty() || !stream_name(consumer)) return "--nats-consumer '" + consumer + "' is not a valid consumer name";
  for (const auto* s : {&jobs_subject, &events_prefix, &dead_subject})
    if (!literal_subject(*s)) return "NATS subject '" + *s + "' is not valid: dot-separated tokens, no wildcards or spaces";
  if (events_prefix == jobs_subject || dead_subject == jobs_subject || dead_subject.rfind(events_prefix + ".", 0) == 0)
    return "the NATS jobs, events and dead-letter subjects must not overlap";
  if (!(ack_wait_s >= 1.0 && ack_wait_s <= 3600.0)) return "--nats-ack-wait must be in [1, 3600] seconds";
  if (max_deliver < 2 || max_deliver > 1000) return "--nats-max-deliver must be in 2..1000";
  if (stream_replicas < 1 || stream_replicas > 5) return "--nats-replicas must be in 1..5 (JetStream's limit)";
  if (!(events_max_age_s >= 60.0) || !std::isfinite(events_max_age_s)) return "--nats-events-max-age must be at least 60 seconds";
  if (!(connect_timeout_s > 0.0 && connect_timeout_s <= 600.0)) return "--nats-connect-timeout must be in (0, 600] seconds";
  return {};
}

std::string nats_events_subject(const std::string& prefix, const std::string& job_id) {
  std::string s = prefix + ".";
  std::string part;
  auto flush = [&] {
    s += part.empty() ? "%" : part;
    part.clear();
  };
  for (char c : job_id) {
    if (c == '/') {
      flush();
      s += '.';
    } else if (c == '.') {
      part += "%2E";
    } else {
      part += c;
    }
  }
  flush();
  return s;
}

std::string nats_event_msg_id(const std::string& job_id, uint64_t seq) { return job_id + ":" + std::to_string(seq); }

} // namespace conveyor::transport
