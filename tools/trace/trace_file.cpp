#include "tools/trace/trace_file.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unordered_map>

#include "engine/chunk_kind.hpp"

namespace conveyor::trace {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& name, size_t line, const std::string& what) {
  throw trace_format_error(name + ":" + std::to_string(line) + ": " + what);
}

trace_header parse_header(const json& h, const std::string& name) {
  if (!h.is_object() || h.value("format", std::string()) != "conveyor-trace")
    fail(name, 1, "not a conveyor trace (the first line must be the header {\"format\":\"conveyor-trace\",...})");
  const json& v = h.contains("version") ? h["version"] : json();
  if (!v.is_number_integer()) fail(name, 1, "the header has no integer 'version'");
  if (v.get<int64_t>() != format_version)
    fail(name, 1, "trace format version " + v.dump() + "; this conveyor reads version " + std::to_string(format_version));
  trace_header r;
  r.batching = h.at("batching").get<std::string>();
  r.max_num_seqs = h.at("max_num_seqs").get<int32_t>();
  r.max_num_batched_tokens = h.at("max_num_batched_tokens").get<int32_t>();
  r.num_kv_blocks = h.at("num_kv_blocks").get<int32_t>();
  r.block_size = h.at("block_size").get<int32_t>();
  r.model = h.value("model", std::string());
  return r;
}

class job_table {
public:
  explicit job_table(std::vector<std::string>& jobs) : jobs_(jobs) {}
  int32_t intern(const std::string& id) {
    auto [it, fresh] = index_.try_emplace(id, static_cast<int32_t>(jobs_.size()));
    if (fresh) jobs_.push_back(id);
    return it->second;
  }

private:
  std::vector<std::string>& jobs_;
  std::unordered_map<std::string, int32_t> index_;
};

step_record parse_step(const json& j, job_table& jobs) {
  step_record s;
  s.step = j.at("step").get<int64_t>();
  s.start_s = j.at("start_s").get<double>();
  s.duration_ms = j.at("duration_ms").get<double>();
  const json& seqs = j.at("seqs");
  if (!seqs.is_array()) throw std::invalid_argument("'seqs' is not an array");
  s.seqs.reserve(seqs.size());
  for (const json& e : seqs) {
    seq_record r;
    r.job = jobs.intern(e.at("job").get<std::string>());
    r.num_tokens = e.at("n").get<int32_t>();
    const std::string kind = e.at("kind").get<std::string>();
    const std::optional<chunk_kind> k = chunk_kind_names.parse(kind);
    if (!k) throw std::invalid_argument("kind '" + kind + "' is not prompt or decode");
    r.prompt = *k == chunk_kind::prompt;
    r.sample = e.at("sample").get<bool>();
    r.drafts = e.value("drafts", 0);
    s.seqs.push_back(r);
  }
  s.kv_blocks_used = j.at("kv_blocks_used").get<int32_t>();
  s.waiting = j.at("waiting").get<int32_t>();
  s.running = j.at("running").get<int32_t>();
  s.preemptions = j.at("preemptions").get<int64_t>();
  s.preemptions_total = j.at("preemptions_total").get<int64_t>();
  s.accepted = j.value("accepted", int64_t{0});
  return s;
}

} // namespace

int32_t step_record::num_tokens() const {
  int32_t n = 0;
  for (const auto& s : seqs) n += s.num_tokens;
  return n;
}

trace_file parse_trace(std::istream& in, const std::string& name) {
  trace_file t;
  job_table jobs(t.jobs);
  std::string line;
  size_t line_no = 0;
  bool have_header = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const bool last_unterminated = in.eof();  // getline hit the end before a '\n'
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      if (!have_header) fail(name, line_no, "not a conveyor trace (the first line is not JSON)");
      if (last_unterminated) {
        t.truncated_tail = true;
        break;
      }
      fail(name, line_no, "not a JSON line");
    }
    try {
      if (!have_header) {
        t.header = parse_header(j, name);
        have_header = true;
      } else {
        t.steps.push_back(parse_step(j, jobs));
      }
    } catch (const trace_format_error&) {
      throw;
    } catch (const std::exception& e) {
      fail(name, line_no, std::string(have_header ? "bad step line: " : "bad header: ") + e.what());
    }
  }
  if (!have_header) throw trace_format_error(name + ": empty file, not a conveyor trace");
  return t;
}

trace_file read_trace(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw trace_format_error(path + ": is a directory, not a trace file");
  std::ifstream in(path);
  if (!in) throw trace_format_error(path + ": cannot open: " + std::strerror(errno));
  return parse_trace(in, path);
}

} // namespace conveyor::trace
