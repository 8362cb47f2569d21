#include "actors/trace_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "engine/chunk_kind.hpp"

namespace conveyor::actors {
namespace {

// Appends `s` as a JSON string. Job ids are [A-Za-z0-9._:/-] (protocol §4); the escaping is
// for whatever else ends up here.
void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x80) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);  // bytes >= 0x80 as code points: still valid JSON
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void append_fixed(std::string& out, double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  out += buf;
}

// A single token at or past the prompt that ends at the newest token is a decode. Everything
// else is a prompt chunk, including the recompute of output tokens after a preemption (their
// chunks start below the newest token, so they do not sample, or are longer than one token).
// A decode with drafts (speculative decoding) is a decode too.
bool is_decode(const scheduled_seq& s, int32_t num_prompt_tokens) {
  return s.tokens.size() == static_cast<size_t>(1 + s.num_drafts) && s.sample && s.num_computed_tokens >= num_prompt_tokens;
}

} // namespace

trace_writer::trace_writer(const std::string& path, const trace_header& h, double start_s)
    : path_(path), start_s_(start_s) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) throw trace_error("--trace " + path + ": cannot open for writing: " + std::strerror(errno));
  std::string line = "{\"format\":\"conveyor-trace\",\"version\":" + std::to_string(format_version) +
                     ",\"batching\":\"" + to_string(h.batching) + "\",\"max_num_seqs\":" +
                     std::to_string(h.max_num_seqs) + ",\"max_num_batched_tokens\":" +
                     std::to_string(h.max_num_batched_tokens) + ",\"num_kv_blocks\":" + std::to_string(h.num_kv_blocks) +
                     ",\"block_size\":" + std::to_string(h.block_size) + ",\"model\":";
  append_json_string(line, h.model);
  line += "}\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    const std::string why = std::strerror(errno);
    std::fclose(file_);
    throw trace_error("--trace " + path + ": cannot write: " + why);
  }
  flusher_ = std::thread([this] { flusher_loop(); });
}

trace_writer::~trace_writer() { close(); }

void trace_writer::begin_step(const step_plan& plan, const scheduler& sched, const job_namer& job_of, double now_s) {
  if (!enabled()) return;
  pending_.push_back({plan.step_id, now_s, {}});
  std::string& body = pending_.back().body;
  body += "\"seqs\":[";
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const scheduled_seq& s = plan.seqs[i];
    const sequence* seq = sched.find(s.id);
    const std::string* job = job_of ? job_of(s.id) : nullptr;
    if (i > 0) body += ',';
    body += "{\"job\":";
    append_json_string(body, job ? *job : "seq-" + std::to_string(s.id));
    body += ",\"n\":" + std::to_string(s.tokens.size());
    const chunk_kind kind = is_decode(s, seq ? seq->num_prompt_tokens : INT32_MAX) ? chunk_kind::decode : chunk_kind::prompt;
    body += std::string(",\"kind\":\"") + chunk_kind_names.name(kind) + "\"";
    if (s.num_drafts > 0) body += ",\"drafts\":" + std::to_string(s.num_drafts);
    body += s.sample ? ",\"sample\":true}" : ",\"sample\":false}";
  }
  const scheduler_stats st = sched.stats();
  body += "],\"kv_blocks_used\":" + std::to_string(st.num_kv_blocks_used) + ",\"waiting\":" +
          std::to_string(st.num_waiting) + ",\"running\":" + std::to_string(st.num_running) +
          ",\"preemptions\":" + std::to_string(st.num_preemptions - last_preemptions_) +
          ",\"preemptions_total\":" + std::to_string(st.num_preemptions) + "}\n";
  last_preemptions_ = st.num_preemptions;
}

void trace_writer::end_step(double now_s, int64_t accepted) {
  if (!enabled() || pending_.empty()) return;
  pending_step done = std::move(pending_.front());
  pending_.pop_front();
  const double start = std::max(done.start_s, last_end_s_);
  last_end_s_ = now_s;
  std::string head = "{\"step\":" + std::to_string(done.step) + ",\"start_s\":";
  append_fixed(head, start - start_s_, 6);
  head += ",\"duration_ms\":";
  append_fixed(head, (now_s - start) * 1000.0, 3);
  if (accepted > 0) head += ",\"accepted\":" + std::to_string(accepted);
  head += ',';
  bool wake = false;
  {
    std::lock_guard lk(mu_);
    buffer_ += head;
    buffer_ += done.body;
    wake = buffer_.size() >= (size_t{1} << 20);  // a burst of big steps: do not wait for the second
  }
  if (wake) cv_.notify_one();
}

void trace_writer::flusher_loop() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::seconds(1));
    if (buffer_.empty()) continue;
    std::string chunk;
    chunk.swap(buffer_);
    lk.unlock();
    write_out(chunk);
    lk.lock();
  }
}

void trace_writer::write_out(std::string& chunk) {
  std::lock_guard io(io_mu_);
  if (!file_ || !enabled()) return;
  if (std::fwrite(chunk.data(), 1, chunk.size(), file_) == chunk.size() && std::fflush(file_) == 0) return;
  // NOTE: tracing must never stop serving: say so once, drop the rest.
  std::fprintf(stderr, "conveyor: --trace %s: write failed (%s); tracing is off from here on\n", path_.c_str(),
               std::strerror(errno));
  enabled_ = false;
  std::fclose(file_);
  file_ = nullptr;
}

void trace_writer::close() {
  {
    std::lock_guard lk(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_one();
  if (flusher_.joinable()) flusher_.join();
  std::string rest;
  {
    std::lock_guard lk(mu_);
    rest.swap(buffer_);
  }
  if (!rest.empty()) write_out(rest);
  std::lock_guard io(io_mu_);
  if (file_) std::fclose(file_);
  file_ = nullptr;
  enabled_ = false;
}

} // namespace conveyor::actors
