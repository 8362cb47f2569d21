// Opening the journal: creating a new one (whole, then renamed into place), and checking an
// existing one read-only before anything may write to it.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal/sqlite_util.hpp"

namespace conveyor::journal {

using namespace detail;

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

} // namespace

std::string journal::file_in(const std::string& state_dir) { return (std::filesystem::path(state_dir) / "journal.db").string(); }

std::string journal::default_state_dir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return (std::filesystem::path(x) / "conveyor").string();
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : ".") / ".local" / "state" / "conveyor").string();
}

journal::journal(const std::string& path, sync_mode mode) : path_(path), mode_(mode) {
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
    struct stat file {};
    if (::stat(path.c_str(), &file) != 0) {
      create_fresh();
    } else if (file.st_size == 0) {
      // A fresh journal is only ever created where no file exists (create_fresh renames a whole
      // one into place), so an empty file is a journal that lost its contents: refuse it.
      fail("is empty (0 bytes): a journal that lost its contents (a disk fault, or a `> journal.db`); its accepted "
           "jobs cannot be resumed. Restore it from a backup, or delete it (and any journal.db-wal beside it) to start an "
           "empty journal, or pass another --state-dir");
    }
    // Checked, and later loaded, read-only: a file refused at either point is left exactly as it
    // was (no WAL merged into it, no WAL deleted: the operator's evidence, and maybe recoverable
    // jobs). open_for_writing() switches once the runtime has accepted what load() found.
    open_connection(SQLITE_OPEN_READONLY);
    check_file(move_away);
  } catch (...) {
    close();
    throw;
  }
}

void journal::open_for_writing() {
  if (writable_) return;
  close_connection();
  open_connection(SQLITE_OPEN_READWRITE);
  exec("PRAGMA journal_mode=WAL");
  exec(mode_ == sync_mode::power ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  exec("PRAGMA journal_size_limit=16777216");  // the WAL shrinks back to 16 MiB after a checkpoint
  exec(("UPDATE meta SET value=" + std::to_string(epoch_) + " WHERE key='epoch'").c_str());
  insert_job_ = prepare("INSERT OR REPLACE INTO jobs(job_id, request, arrival_unix) VALUES(?1, ?2, ?3)");
  clear_events_ = prepare("DELETE FROM events WHERE job_id=?1");
  insert_event_ = prepare("INSERT INTO events(job_id, seq, body) VALUES(?1, ?2, ?3)");
  end_job_ = prepare("UPDATE jobs SET ended_unix=?2 WHERE job_id=?1");
  mark_running_ = prepare("UPDATE jobs SET running_epoch=?2 WHERE job_id=?1");
  mark_cancelled_ = prepare("UPDATE jobs SET cancelled=1 WHERE job_id=?1");
  writable_ = true;
  store_crash_runs();
}

void journal::open_connection(int flags) {
  if (sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr) != SQLITE_OK)
    fail(std::string("cannot open: ") + (db_ ? sqlite3_errmsg(db_) : "out of memory") + "; fix it or pass another --state-dir");
  sqlite3_extended_result_codes(db_, 1);
  // Closing never checkpoints until the file has been checked (a read-only connection cannot).
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, flags == SQLITE_OPEN_READONLY ? 1 : 0, nullptr);
}

void journal::close_connection() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

// A new journal, written whole under a temporary name and renamed into place: a crash while it
// is created leaves no file (or the temporary one), never a half-made or empty journal.db.
void journal::create_fresh() {
  const std::string tmp = path_ + ".new";
  std::error_code ignored;  // a temporary file left by a crash while creating
  std::filesystem::remove(tmp, ignored);
  std::filesystem::remove(tmp + "-journal", ignored);
  if (sqlite3_open_v2(tmp.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    fail(std::string("cannot create ") + tmp + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory") + "; pass a writable --state-dir");
  exec("PRAGMA synchronous=FULL");
  exec("BEGIN");
  exec(schema_sql);
  exec(("INSERT INTO meta VALUES('format','" + std::string(format_name) + "'),('version'," + std::to_string(format_version) +
        "),('epoch',0)").c_str());
  exec("COMMIT");
  close_connection();
  if (std::rename(tmp.c_str(), path_.c_str()) != 0)
    fail("cannot move the new journal into place (" + std::string(std::strerror(errno)) + "); pass a writable --state-dir");
  const auto dir = std::filesystem::path(path_).parent_path();
  if (int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
    ::fsync(fd);  // the rename survives power loss
    ::close(fd);
  }
}

// Refuses a file that is not a sound conveyor journal; reads only.
void journal::check_file(const std::string& move_away) {
  {
    stmt tables;
    if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM sqlite_master", -1, &tables.s, nullptr) != SQLITE_OK ||
        sqlite3_step(tables.s) != SQLITE_ROW)
      fail(std::string("not a conveyor journal (") + sqlite3_errmsg(db_) + "): " + move_away);
    if (sqlite3_column_int64(tables.s, 0) == 0) fail("an SQLite file without tables, not a conveyor journal: " + move_away);
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

} // namespace conveyor::journal
