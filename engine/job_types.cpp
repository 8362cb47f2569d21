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

const char* to_string(refusal_code code) {
  switch (code) {
    case refusal_code::bad_request: return "bad_request";
    case refusal_code::too_long: return "too_long";
    case refusal_code::overloaded: return "overloaded";
    case refusal_code::duplicate: return "duplicate";
    case refusal_code::shutting_down: return "shutting_down";
    case refusal_code::internal: return "internal";
  }
  return "?";
}

} // namespace conveyor
