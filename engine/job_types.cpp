#include "engine/job_types.hpp"

namespace conveyor {

const char* to_string(job_state state) {
  switch (state) {
    case job_state::queued: return "queued";
    case job_state::running: return "running";
    case job_state::finished: return "finished";
    case job_state::cancelled: return "cancelled";
    case job_state::failed: return "failed";
  }
  return "?";
}

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

} // namespace conveyor
