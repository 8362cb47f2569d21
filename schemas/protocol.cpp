#include "schemas/protocol.hpp"

#include "engine/enum_names.hpp"

namespace conveyor::schemas {

std::optional<error_code> error_code_from_string(std::string_view name) { return parse_error_code(name); }

const char* to_string(server_status status) {
  static constexpr auto names =
      make_enum_names<server_status>({{server_status::serving, "serving"}, {server_status::draining, "draining"}}, "draining");
  return names.name(status);
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
