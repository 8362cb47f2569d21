// Pure. The client side of the protocol the load generator needs (schemas/protocol.md):
// encoding `submit`, `fetch` and `health` requests, and decoding replies and job events into
// the few fields the benchmark records. Decoding reuses one msgpack zone, so the hot path (one
// event per token per stream) allocates little; malformed input gives std::nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "engine/job_types.hpp"
#include "tools/bench/workload.hpp"

namespace conveyor::bench {

struct submit_settings {
  /// 0 = greedy, as vLLM's benchmark requests.
  double temperature = 0.0;
  /// Per-job seed (the request's index is added); absent lets the server pick.
  std::optional<uint64_t> seed;
};

std::string encode_submit(const bench_request& r, std::string_view id, const submit_settings& s);
std::string encode_fetch(std::string_view id, int64_t from_seq, int64_t max_events);
std::string encode_health();
std::string encode_stats();

enum class event_kind { accepted, tokens, done, error, other };

/// The fields of a job event the benchmark uses.
struct event_view {
  std::string id;
  int64_t seq = -1;
  event_kind kind = event_kind::other;
  /// tokens: len(token_ids).
  int32_t num_tokens = 0;
  /// done: usage and finish_reason; error: code.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::string finish_reason;
  std::string error_code;
};

/// The fields of a reply the benchmark uses.
struct reply_view {
  bool ok = false;
  std::string id;
  std::string error_code;  ///< the wire name, as the report counts it
  std::optional<conveyor::error_code> code;  ///< the same, when it is one this build knows
  /// health: model; fetch: events and complete.
  std::string model;
  std::vector<event_view> events;
  bool complete = false;
  /// stats: preemptions_total (-1 when absent).
  int64_t preemptions_total = -1;
  /// stats: speculative decoding's counters (-1 when absent).
  int64_t spec_drafts_total = -1, spec_draft_tokens_total = -1, spec_accepted_tokens_total = -1;
};

class decoder {
public:
  std::optional<event_view> event(const void* data, size_t size);
  std::optional<reply_view> reply(const void* data, size_t size);

private:
  msgpack::zone zone_;
};

} // namespace conveyor::bench
