#include "schemas/protocol.hpp"

namespace conveyor::schemas {

const char* to_string(error_code code) {
  switch (code) {
    case error_code::bad_request: return "bad_request";
    case error_code::too_long: return "too_long";
    case error_code::overloaded: return "overloaded";
    case error_code::duplicate: return "duplicate";
    case error_code::not_found: return "not_found";
    case error_code::shutting_down: return "shutting_down";
    case error_code::internal: return "internal";
  }
  return "internal";
}

std::optional<error_code> error_code_from_string(std::string_view name) {
  for (auto code : {error_code::bad_request, error_code::too_long, error_code::overloaded,
                    error_code::duplicate, error_code::not_found, error_code::shutting_down,
                    error_code::internal})
    if (name == to_string(code)) return code;
  return std::nullopt;
}

error_code to_error_code(refusal_code code) {
  switch (code) {
    case refusal_code::bad_request: return error_code::bad_request;
    case refusal_code::too_long: return error_code::too_long;
    case refusal_code::overloaded: return error_code::overloaded;
    case refusal_code::duplicate: return error_code::duplicate;
    case refusal_code::shutting_down: return error_code::shutting_down;
    case refusal_code::internal: return error_code::internal;
  }
  return error_code::internal;
}

const char* to_string(server_status status) {
  switch (status) {
    case server_status::serving: return "serving";
    case server_status::draining: return "draining";
  }
  return "draining";
}

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > max_id_bytes) return false;
  for (char c : id) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string topic_for(const std::string& id) { return "job/" + id + "/"; }

} // namespace conveyor::schemas
