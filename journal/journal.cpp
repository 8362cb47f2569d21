// The journal on SQLite's C API: one connection, prepared statements for the hot writes.
#include "journal/journal.hpp"

#include "journal/sqlite_util.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace conveyor::journal {

using namespace detail;

const char* to_string(sync_mode m) { return m == sync_mode::power ? "power" : "process"; }

std::optional<sync_mode> sync_mode_from_string(const std::string& s) {
  if (s == "process") return sync_mode::process;
  if (s == "power") return sync_mode::power;
  return std::nullopt;
}

void journal::fail(const std::string& what) const { throw journal_error("journal " + path_ + ": " + what); }

void journal::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    fail(msg);
  }
}

sqlite3_stmt* journal::prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) fail(sqlite3_errmsg(db_));
  return s;
}

journal::~journal() { close(); }

void journal::close() {
  for (sqlite3_stmt* s : {insert_job_, clear_events_, insert_event_, end_job_, mark_running_, mark_cancelled_}) sqlite3_finalize(s);
  insert_job_ = clear_events_ = insert_event_ = end_job_ = mark_running_ = mark_cancelled_ = nullptr;
  close_connection();
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

std::vector<stored_job> journal::load() {
  std::vector<stored_job> out;
  const std::string corrupt = "; move the file away (its jobs are then lost) or pass another --state-dir";
  stmt jobs, events, last;
  if (sqlite3_prepare_v2(db_, "SELECT job_id, request, arrival_unix, ended_unix, running_epoch, crash_runs, cancelled FROM jobs ORDER BY arrival_unix",
                         -1, &jobs.s, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_, "SELECT seq, body FROM events WHERE job_id=?1 ORDER BY seq", -1, &events.s, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_, "SELECT body FROM events WHERE job_id=?1 ORDER BY seq DESC LIMIT 1", -1, &last.s, nullptr) != SQLITE_OK)
    fail(sqlite3_errmsg(db_));
  exec("BEGIN");  // one snapshot (read-only until open_for_writing)
  std::vector<std::pair<std::string, int32_t>> crash_runs;
  try {
    int rc;
    while ((rc = sqlite3_step(jobs.s)) == SQLITE_ROW) {
      stored_job j;
      j.job_id = reinterpret_cast<const char*>(sqlite3_column_text(jobs.s, 0));
      j.request = column_bytes(jobs.s, 1);
      j.arrival_unix = sqlite3_column_double(jobs.s, 2);
      if (sqlite3_column_type(jobs.s, 3) != SQLITE_NULL) j.ended_unix = sqlite3_column_double(jobs.s, 3);
      j.cancelled = sqlite3_column_int64(jobs.s, 6) != 0;
      sqlite3_stmt* ev = j.ended_unix ? last.s : events.s;
      bind_text(ev, 1, j.job_id);
      while (sqlite3_step(ev) == SQLITE_ROW) {
        if (!j.ended_unix && sqlite3_column_int64(ev, 0) != static_cast<int64_t>(j.events.size()))
          fail("job '" + j.job_id + "' has a gap in its events at seq " + std::to_string(j.events.size()) + corrupt);
        j.events.push_back(column_bytes(ev, j.ended_unix ? 0 : 1));
      }
      sqlite3_reset(ev);
      if (j.events.empty()) fail("job '" + j.job_id + "' has no events" + corrupt);
      if (!j.ended_unix) {
        const bool ran_in_last = sqlite3_column_int64(jobs.s, 4) == epoch_ - 1;
        j.crash_runs = ran_in_last ? static_cast<int32_t>(sqlite3_column_int64(jobs.s, 5)) + 1 : 0;
        crash_runs.emplace_back(j.job_id, j.crash_runs);
      }
      out.push_back(std::move(j));
    }
    if (rc != SQLITE_DONE) fail(std::string(sqlite3_errmsg(db_)) + corrupt);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  pending_crash_runs_ = std::move(crash_runs);
  if (writable_) store_crash_runs();
  return out;
}

// The crash counts load() found, stored (they count this start as one more run).
void journal::store_crash_runs() {
  if (pending_crash_runs_.empty()) return;
  stmt update;
  if (sqlite3_prepare_v2(db_, "UPDATE jobs SET crash_runs=?2 WHERE job_id=?1", -1, &update.s, nullptr) != SQLITE_OK) fail(sqlite3_errmsg(db_));
  exec("BEGIN IMMEDIATE");
  try {
    for (const auto& [id, n] : pending_crash_runs_) {
      bind_text(update.s, 1, id);
      sqlite3_bind_int64(update.s, 2, n);
      if (run(update.s) != SQLITE_DONE) fail(sqlite3_errmsg(db_));
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  pending_crash_runs_.clear();
}

// One job's writes in a batch, in the batch's order.
struct journal::job_writes {
  std::vector<const write_batch::job*> jobs;
  std::vector<const write_batch::event*> events;
  bool running = false, cancelled = false;
};

// Runs one job's writes; returns SQLITE_DONE or the first failing statement's code.
int journal::write_job(const std::string& id, const job_writes& w, double now_unix, std::string& why) {
  int rc = SQLITE_DONE;
  auto step = [&](sqlite3_stmt* s) {
    if (rc == SQLITE_DONE) {
      while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      }
      if (rc != SQLITE_DONE) why = sqlite3_errmsg(db_);  // (reset clears it)
    }
    sqlite3_reset(s);
  };
  for (const auto* j : w.jobs) {
    // The job table took this id as new: whatever an older job of that id left (forgotten by the
    // table, not yet pruned here) goes, so the new job's events start at seq 0.
    bind_text(clear_events_, 1, j->job_id);
    step(clear_events_);
    bind_text(insert_job_, 1, j->job_id);
    bind_blob(insert_job_, 2, j->request);
    sqlite3_bind_double(insert_job_, 3, j->arrival_unix);
    step(insert_job_);
  }
  for (const auto* e : w.events) {
    bind_text(insert_event_, 1, e->job_id);
    sqlite3_bind_int64(insert_event_, 2, static_cast<int64_t>(e->seq));
    bind_blob(insert_event_, 3, e->body);
    step(insert_event_);
    if (e->terminal) {
      bind_text(end_job_, 1, e->job_id);
      sqlite3_bind_double(end_job_, 2, now_unix);
      step(end_job_);
    }
  }
  if (w.running) {
    bind_text(mark_running_, 1, id);
    sqlite3_bind_int64(mark_running_, 2, epoch_);
    step(mark_running_);
  }
  if (w.cancelled) {
    bind_text(mark_cancelled_, 1, id);
    step(mark_cancelled_);
  }
  return rc;
}

std::vector<refused_job> journal::commit(const write_batch& b) {
  if (b.empty()) return {};
  open_for_writing();
  std::vector<std::string> order;
  std::unordered_map<std::string, job_writes> by_job;
  auto of = [&](const std::string& id) -> job_writes& {
    auto [it, fresh] = by_job.try_emplace(id);
    if (fresh) order.push_back(id);
    return it->second;
  };
  for (const auto& j : b.jobs) of(j.job_id).jobs.push_back(&j);
  for (const auto& e : b.events) of(e.job_id).events.push_back(&e);
  for (const auto& id : b.running) of(id).running = true;
  for (const auto& id : b.cancelled) of(id).cancelled = true;
  // First the whole batch at once. Should one job's writes break a constraint (a bug upstream:
  // an event stored twice), the batch is written again job by job, each in a savepoint, and only
  // that job's writes are left out: one job's fault never costs the other jobs their commit.
  std::vector<refused_job> refused;
  for (const bool per_job : {false, true}) {
    exec("BEGIN IMMEDIATE");
    bool constraint = false;
    try {
      for (const auto& id : order) {
        if (per_job) exec("SAVEPOINT job");
        std::string why;
        const int rc = write_job(id, by_job.at(id), b.now_unix, why);
        if (rc == SQLITE_DONE) {
          if (per_job) exec("RELEASE job");
          continue;
        }
        if ((rc & 0xff) != SQLITE_CONSTRAINT) fail("write failed: " + why);
        if (!per_job) {
          constraint = true;
          break;
        }
        exec("ROLLBACK TO job");
        exec("RELEASE job");
        refused.push_back({id, why});
      }
      if (constraint) {
        exec("ROLLBACK");
        continue;
      }
      exec("COMMIT");
      return refused;
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  return refused;  // (not reached: the second pass commits or throws)
}

size_t journal::prune(double before_unix, size_t max_ended) {
  open_for_writing();
  stmt sel;
  if (sqlite3_prepare_v2(db_, "SELECT job_id FROM jobs WHERE ended_unix IS NOT NULL AND (ended_unix < ?1 OR job_id IN "
                              "(SELECT job_id FROM jobs WHERE ended_unix IS NOT NULL ORDER BY ended_unix DESC LIMIT -1 OFFSET ?2))",
                         -1, &sel.s, nullptr) != SQLITE_OK)
    fail(sqlite3_errmsg(db_));
  sqlite3_bind_double(sel.s, 1, before_unix);
  sqlite3_bind_int64(sel.s, 2, static_cast<int64_t>(max_ended));
  std::vector<std::string> ids;
  while (sqlite3_step(sel.s) == SQLITE_ROW) ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(sel.s, 0)));
  if (ids.empty()) return 0;
  stmt del_ev, del_job;
  if (sqlite3_prepare_v2(db_, "DELETE FROM events WHERE job_id=?1", -1, &del_ev.s, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_, "DELETE FROM jobs WHERE job_id=?1", -1, &del_job.s, nullptr) != SQLITE_OK)
    fail(sqlite3_errmsg(db_));
  exec("BEGIN IMMEDIATE");
  try {
    for (const auto& id : ids) {
      bind_text(del_ev.s, 1, id);
      bind_text(del_job.s, 1, id);
      if (run(del_ev.s) != SQLITE_DONE || run(del_job.s) != SQLITE_DONE) fail(std::string("prune failed: ") + sqlite3_errmsg(db_));
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return ids.size();
}

std::optional<stored_slice> journal::read(const std::string& job_id, uint64_t from, uint64_t max) {
  stmt job, count, ev;
  if (sqlite3_prepare_v2(db_, "SELECT ended_unix FROM jobs WHERE job_id=?1", -1, &job.s, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_, "SELECT count(*) FROM events WHERE job_id=?1", -1, &count.s, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_, "SELECT body FROM events WHERE job_id=?1 AND seq>=?2 ORDER BY seq LIMIT ?3", -1, &ev.s, nullptr) != SQLITE_OK)
    fail(sqlite3_errmsg(db_));
  bind_text(job.s, 1, job_id);
  if (sqlite3_step(job.s) != SQLITE_ROW) return std::nullopt;
  stored_slice out;
  out.ended = sqlite3_column_type(job.s, 0) != SQLITE_NULL;
  bind_text(count.s, 1, job_id);
  if (sqlite3_step(count.s) == SQLITE_ROW) out.next_seq = static_cast<uint64_t>(sqlite3_column_int64(count.s, 0));
  bind_text(ev.s, 1, job_id);
  sqlite3_bind_int64(ev.s, 2, static_cast<int64_t>(from));
  sqlite3_bind_int64(ev.s, 3, static_cast<int64_t>(max));
  while (sqlite3_step(ev.s) == SQLITE_ROW) out.events.push_back(column_bytes(ev.s, 0));
  return out;
}

int64_t journal::disk_bytes() const {
  int64_t total = 0;
  struct stat st {};
  for (const std::string& p : {path_, path_ + "-wal"})
    if (::stat(p.c_str(), &st) == 0) total += st.st_size;
  return total;
}

} // namespace conveyor::journal
