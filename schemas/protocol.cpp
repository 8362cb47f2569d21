#include "schemas/protocol.hpp"

namespace conveyor::schemas {

std::optional<error_code> error_code_from_string(std::string_view name) {
  for (auto code : {error_code::bad_request, error_code::too_long, error_code::overloaded,
                    error_code::duplicate, error_code::not_found, error_code::shutting_down,
                    error_code::internal})
    if (name == to_string(code)) return code;
  return std::nullopt;
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
