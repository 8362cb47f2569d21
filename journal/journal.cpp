// The journal on SQLite's C API: one connection, prepared statements for the hot writes.
#include "journal/journal.hpp"

#include <sqlite3.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace conveyor::journal {
namespace {

constexpr const char* format_name = "conveyor-journal";
constexpr int64_t format_version = 1;

const char* schema_sql =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
    "CREATE TABLE jobs(job_id TEXT PRIMARY KEY, request BLOB NOT NULL, arrival_unix REAL NOT NULL,"
    "  ended_unix REAL, running_epoch INTEGER NOT NULL DEFAULT 0, crash_runs INTEGER NOT NULL DEFAULT 0,"
    "  cancelled INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX jobs_ended ON jobs(ended_unix) WHERE ended_unix IS NOT NULL;"
    "CREATE TABLE events(job_id TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL,"
    "  PRIMARY KEY(job_id, seq)) WITHOUT ROWID;";

// Steps a statement to its end and resets it; returns the last result code.
int run(sqlite3_stmt* s) {
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
  }
  sqlite3_reset(s);
  return rc;
}

bytes column_bytes(sqlite3_stmt* s, int i) {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(s, i));
  return bytes(p, p + sqlite3_column_bytes(s, i));
}

void bind_text(sqlite3_stmt* s, int i, const std::string& v) { sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC); }
void bind_blob(sqlite3_stmt* s, int i, const bytes& v) { sqlite3_bind_blob(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC); }

// RAII for statements prepared once per call.
struct stmt {
  sqlite3_stmt* s = nullptr;
  ~stmt() { sqlite3_finalize(s); }
};

} // namespace

const char* to_string(sync_mode m) { return m == sync_mode::power ? "power" : "process"; }

std::optional<sync_mode> sync_mode_from_string(const std::string& s) {
  if (s == "process") return sync_mode::process;
  if (s == "power") return sync_mode::power;
  return std::nullopt;
}

std::string journal::file_in(const std::string& state_dir) { return (std::filesystem::path(state_dir) / "journal.db").string(); }

std::string journal::default_state_dir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return (std::filesystem::path(x) / "conveyor").string();
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : ".") / ".local" / "state" / "conveyor").string();
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

journal::journal(const std::string& path, sync_mode mode) : path_(path) {
  const std::string move_away = "move the file away (its jobs are then lost) or pass another --state-dir";
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create its directory " + dir.string() + " (" + ec.message() + "); pass a writable --state-dir");
  if (access(path.c_str(), F_OK) == 0 && access(path.c_str(), R_OK | W_OK) != 0)
    fail(std::string("not readable and writable by this user (") + std::strerror(errno) + "); fix its permissions or pass another --state-dir");
  const std::string lock_path = path + ".lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) fail("cannot open its lock file " + lock_path + " (" + std::strerror(errno) + "); pass a writable --state-dir");
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    fail("in use by another conveyor server (it holds " + lock_path + "); stop that one or give this one its own --state-dir");
  }
  try {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
      fail(std::string("cannot open: ") + (db_ ? sqlite3_errmsg(db_) : "out of memory") + "; fix it or pass another --state-dir");
    sqlite3_extended_result_codes(db_, 1);
    check_file(move_away);
    exec("PRAGMA journal_mode=WAL");
    exec(mode == sync_mode::power ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    exec("PRAGMA journal_size_limit=16777216");  // the WAL shrinks back to 16 MiB after a checkpoint
    exec(("UPDATE meta SET value=" + std::to_string(epoch_) + " WHERE key='epoch'").c_str());
    insert_job_ = prepare("INSERT OR REPLACE INTO jobs(job_id, request, arrival_unix) VALUES(?1, ?2, ?3)");
    insert_event_ = prepare("INSERT INTO events(job_id, seq, body) VALUES(?1, ?2, ?3)");
    end_job_ = prepare("UPDATE jobs SET ended_unix=?2 WHERE job_id=?1");
    mark_running_ = prepare("UPDATE jobs SET running_epoch=?2 WHERE job_id=?1");
    mark_cancelled_ = prepare("UPDATE jobs SET cancelled=1 WHERE job_id=?1");
  } catch (...) {
    close();
    throw;
  }
}

// Creates the schema in an empty file; refuses a file that is not a sound conveyor journal.
void journal::check_file(const std::string& move_away) {
  bool fresh = false;
  {
    stmt tables;
    if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM sqlite_master", -1, &tables.s, nullptr) != SQLITE_OK ||
        sqlite3_step(tables.s) != SQLITE_ROW)
      fail(std::string("not a conveyor journal (") + sqlite3_errmsg(db_) + "): " + move_away);
    fresh = sqlite3_column_int64(tables.s, 0) == 0;
  }
  if (fresh) {
    exec("BEGIN");
    exec(schema_sql);
    exec(("INSERT INTO meta VALUES('format','" + std::string(format_name) + "'),('version'," + std::to_string(format_version) +
          "),('epoch',0)").c_str());
    exec("COMMIT");
  }
  {
    stmt meta;
    if (sqlite3_prepare_v2(db_, "SELECT (SELECT value FROM meta WHERE key='format'), (SELECT value FROM meta WHERE key='version'),"
                                "(SELECT value FROM meta WHERE key='epoch')", -1, &meta.s, nullptr) != SQLITE_OK ||
        sqlite3_step(meta.s) != SQLITE_ROW)
      fail("an SQLite file of another program (no conveyor meta table): " + move_away);
    const auto* fmt = reinterpret_cast<const char*>(sqlite3_column_text(meta.s, 0));
    if (!fmt || std::string(fmt) != format_name) fail("an SQLite file of another program (its format is not conveyor-journal): " + move_away);
    if (sqlite3_column_int64(meta.s, 1) > format_version)
      fail("written by a newer conveyor (journal version " + std::to_string(sqlite3_column_int64(meta.s, 1)) +
           "); run that version, or " + move_away);
    epoch_ = sqlite3_column_int64(meta.s, 2) + 1;
  }
  stmt check;
  if (sqlite3_prepare_v2(db_, "PRAGMA quick_check", -1, &check.s, nullptr) != SQLITE_OK || sqlite3_step(check.s) != SQLITE_ROW ||
      std::string(reinterpret_cast<const char*>(sqlite3_column_text(check.s, 0))) != "ok")
    fail(std::string("corrupt (SQLite's quick_check failed: ") + sqlite3_errmsg(db_) + "): " + move_away);
}

journal::~journal() { close(); }

void journal::close() {
  for (sqlite3_stmt* s : {insert_job_, insert_event_, end_job_, mark_running_, mark_cancelled_}) sqlite3_finalize(s);
  insert_job_ = insert_event_ = end_job_ = mark_running_ = mark_cancelled_ = nullptr;
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
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
  exec("BEGIN IMMEDIATE");
  try {
    stmt update;
    if (sqlite3_prepare_v2(db_, "UPDATE jobs SET crash_runs=?2 WHERE job_id=?1", -1, &update.s, nullptr) != SQLITE_OK)
      fail(sqlite3_errmsg(db_));
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
        bind_text(update.s, 1, j.job_id);
        sqlite3_bind_int64(update.s, 2, j.crash_runs);
        if (run(update.s) != SQLITE_DONE) fail(sqlite3_errmsg(db_));
      }
      out.push_back(std::move(j));
    }
    if (rc != SQLITE_DONE) fail(std::string(sqlite3_errmsg(db_)) + corrupt);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return out;
}

void journal::commit(const write_batch& b) {
  if (b.empty()) return;
  exec("BEGIN IMMEDIATE");
  try {
    auto check = [this](int rc) {
      if (rc != SQLITE_DONE) fail(std::string("write failed: ") + sqlite3_errmsg(db_));
    };
    for (const auto& j : b.jobs) {
      bind_text(insert_job_, 1, j.job_id);
      bind_blob(insert_job_, 2, j.request);
      sqlite3_bind_double(insert_job_, 3, j.arrival_unix);
      check(run(insert_job_));
    }
    for (const auto& e : b.events) {
      bind_text(insert_event_, 1, e.job_id);
      sqlite3_bind_int64(insert_event_, 2, static_cast<int64_t>(e.seq));
      bind_blob(insert_event_, 3, e.body);
      check(run(insert_event_));
      if (e.terminal) {
        bind_text(end_job_, 1, e.job_id);
        sqlite3_bind_double(end_job_, 2, b.now_unix);
        check(run(end_job_));
      }
    }
    for (const auto& id : b.running) {
      bind_text(mark_running_, 1, id);
      sqlite3_bind_int64(mark_running_, 2, epoch_);
      check(run(mark_running_));
    }
    for (const auto& id : b.cancelled) {
      bind_text(mark_cancelled_, 1, id);
      check(run(mark_cancelled_));
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

size_t journal::prune(double before_unix, size_t max_ended) {
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
