#include "engine/job_types.hpp"

#include "engine/enum_names.hpp"

namespace conveyor {

namespace {

constexpr auto job_state_names = make_enum_names<job_state>(
    {{job_state::queued, "queued"}, {job_state::running, "running"}, {job_state::finished, "finished"},
     {job_state::cancelled, "cancelled"}, {job_state::failed, "failed"}});
constexpr auto error_code_names = make_enum_names<error_code>(
    {{error_code::bad_request, "bad_request"}, {error_code::too_long, "too_long"},
     {error_code::overloaded, "overloaded"}, {error_code::duplicate, "duplicate"},
     {error_code::not_found, "not_found"}, {error_code::shutting_down, "shutting_down"},
     {error_code::internal, "internal"}},
    "internal");

} // namespace

const char* to_string(job_state state) { return job_state_names.name(state); }
const char* to_string(error_code code) { return error_code_names.name(code); }
std::optional<error_code> parse_error_code(std::string_view name) { return error_code_names.parse(name); }

} // namespace conveyor
