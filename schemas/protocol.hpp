// The wire protocol's shared vocabulary: version, error codes, job states, id rules, topics and
// the decoder's limits. schemas/protocol.md is the spec users read; this header mirrors it.
// Pure: the standard library only (msgpack appears in the .cpp files, never in these headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/job_types.hpp"

namespace conveyor::schemas {

/// The protocol version this code speaks; `health` replies and heartbeats carry it.
inline constexpr int32_t protocol_version = 1;

/// Encoded msgpack bytes (one complete msgpack object: a reply map or an event map).
using wire_bytes = std::vector<uint8_t>;

/// Why a message was refused (the engine's enum, one code end to end; its wire names are
/// to_string(error_code)). Every code is documented in protocol.md with what a producer should
/// do about it.
using error_code = conveyor::error_code;
using conveyor::to_string;
/// The code with this wire name, or nullopt.
std::optional<error_code> error_code_from_string(std::string_view name);

/// Where a job is in its life, as `status` and `cancel` replies report it (the engine's enum;
/// its wire names are to_string(job_state): "queued", "running", "finished", "cancelled", "failed").
using job_state = conveyor::job_state;

/// Whether the server serves new jobs or is draining before shutdown (`health`, heartbeat).
enum class server_status { serving, draining };
const char* to_string(server_status status);

/// Longest job id, in bytes.
inline constexpr std::size_t max_id_bytes = 128;

/// True when `id` is 1..128 characters of [A-Za-z0-9._:/-].
bool valid_id(std::string_view id);

/// The PUB topic of a job's events: "job/<id>/". The trailing '/' keeps "job/a/" from
/// matching "job/ab/"; a '/' inside ids allows group subscriptions ("job/batch-7/").
std::string topic_for(const std::string& id);

/// The PUB topic of the server's heartbeat events.
inline constexpr std::string_view heartbeat_topic = "sys/";

/// Bounds the decoder enforces before and while parsing one inbound frame. The defaults are the
/// documented protocol limits; a server may lower (or raise) them in its config.
struct decode_limits {
  /// Largest frame, in bytes; a longer one is refused with too_long before parsing.
  std::size_t max_message_bytes = 1u << 20;
  /// msgpack::unpack_limit: most elements in any array (prompt_tokens is the long one).
  std::size_t max_array_len = 1u << 17;
  /// msgpack::unpack_limit: most key/value pairs in any map. logit_bias is the wide one: above
  /// its own limit (max_logit_bias, 300) and below this one, its refusal names the field.
  std::size_t max_map_len = 512;
  /// msgpack::unpack_limit: longest str (and bin) in bytes.
  std::size_t max_str_bytes = 1u << 20;
  /// msgpack::unpack_limit: deepest container nesting (the top map is depth 1; messages need 3).
  std::size_t max_depth = 6;
  /// Most entries in `messages`.
  std::size_t max_messages = 4096;
  /// Most entries in `stop`, and the longest one in bytes.
  std::size_t max_stop_strings = 64;
  std::size_t max_stop_bytes = 1024;
  /// Most entries in `stop_token_ids`.
  std::size_t max_stop_token_ids = 1024;
  /// Most events one `fetch` may ask for.
  int32_t max_fetch_events = 4096;
};

/// Why decode_request() refused a frame. `field` names the offending key ("" when the frame as a
/// whole is bad); `id` is the job id when one was read and valid before the failure, so the
/// server can address its error reply or error event.
struct decode_error {
  error_code code = error_code::bad_request;
  std::string field;
  std::string message;
  std::string id;
  /// The frame named op "submit" (the refusal then counts as a rejected job).
  bool submit = false;
};

} // namespace conveyor::schemas
