// The job journal: an SQLite file (WAL mode) that makes `accepted` mean something across a
// crash. One writer, the publisher's thread, commits each group of writes in one transaction:
// the accepted jobs' requests, the events of one step (never one commit per token), the marks of
// jobs first run in this incarnation. At start-up the runtime loads it to resume unfinished jobs
// and to remember finished ones for the retention period.
//
//   meta(key, value)        format "conveyor-journal", version, epoch (one per start-up)
//   jobs(job_id, request, arrival_unix, ended_unix, running_epoch, crash_runs, cancelled)
//   events(job_id, seq, body)   every event published, as sent
//
// Errors are journal_error with one line naming the file and the fix; a file that is not ours
// (corrupt, foreign, from a newer conveyor, locked by another server) is never overwritten.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace conveyor::journal {

using bytes = std::vector<uint8_t>;

/// What a commit survives: `process` a crash of the server (SQLite synchronous=NORMAL in WAL:
/// the OS has every committed write), `power` also power loss (synchronous=FULL: fsync per commit).
enum class sync_mode { process, power };
const char* to_string(sync_mode m);
std::optional<sync_mode> sync_mode_from_string(const std::string& s);

struct journal_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One job as the journal holds it.
struct stored_job {
  std::string job_id;
  bytes request;               ///< the submit map (schemas::encode(submit_request)), seed resolved
  double arrival_unix = 0.0;   ///< wall-clock arrival, seconds since the epoch
  std::optional<double> ended_unix;  ///< set once its terminal event is stored
  int32_t crash_runs = 0;      ///< consecutive crashed incarnations it was running in (load())
  bool cancelled = false;      ///< a cancel was acknowledged (it ends as cancelled, not resumed)
  std::vector<bytes> events;   ///< seq 0, 1, ... (ended jobs: only the terminal event, see load())
};

/// The writes of one transaction.
struct write_batch {
  struct job {
    std::string job_id;
    bytes request;
    double arrival_unix = 0.0;
  };
  struct event {
    std::string job_id;
    uint64_t seq = 0;
    bytes body;
    bool terminal = false;
  };
  std::vector<job> jobs;
  std::vector<event> events;
  std::vector<std::string> running;  ///< jobs first scheduled in this incarnation
  std::vector<std::string> cancelled;  ///< jobs whose cancel is acknowledged once this commits
  double now_unix = 0.0;             ///< ended_unix of the terminal events
  bool empty() const { return jobs.empty() && events.empty() && running.empty() && cancelled.empty(); }
  void clear() { jobs.clear(), events.clear(), running.clear(), cancelled.clear(); }
};

/// A job whose writes a commit left out, and why (a constraint of the file they broke).
struct refused_job {
  std::string job_id;
  std::string why;
};

/// A slice of one job's stored events, for `fetch`.
struct stored_slice {
  std::vector<bytes> events;  ///< from `from`
  uint64_t next_seq = 0;      ///< events stored in all
  bool ended = false;
};

class journal {
public:
  /// "<state_dir>/journal.db".
  static std::string file_in(const std::string& state_dir);
  /// $XDG_STATE_HOME/conveyor, else $HOME/.local/state/conveyor.
  static std::string default_state_dir();

  /// Opens (creating the directory and the file when absent) and checks it read-only, and takes
  /// the file's lock (one server per journal). Throws journal_error. Nothing is written until
  /// open_for_writing() (or the first commit or prune).
  journal(const std::string& path, sync_mode mode);
  ~journal();
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  const std::string& path() const { return path_; }
  /// This incarnation's number, from 1.
  int64_t epoch() const { return epoch_; }

  /// Starts writing: a new epoch, and the crash counts load() found stored. Call it once what
  /// load() returned was accepted: a journal refused before (a bad file, a job it cannot
  /// resume) is left byte for byte as it was, its WAL included.
  void open_for_writing();
  /// Every stored job, by arrival. Unfinished jobs come with all their events and their crash
  /// count updated for this start (a job marked running in the previous epoch: +1, else 0);
  /// ended jobs with their terminal event alone. Throws journal_error.
  std::vector<stored_job> load();
  /// Writes a batch in one transaction. A new job replaces what an older job of its id left.
  /// A job whose writes break a constraint of the file (an event seq stored twice) is left out,
  /// its writes of this batch all, and returned; the other jobs' writes are stored. Any other
  /// failure (disk full, I/O) throws journal_error, and nothing of the batch is stored.
  std::vector<refused_job> commit(const write_batch& b);
  /// Deletes ended jobs (and their events) that ended before `before_unix`, and the oldest ended
  /// ones beyond `max_ended`. Returns the jobs deleted.
  size_t prune(double before_unix, size_t max_ended);
  /// Events [from, from + max) of a job, or nullopt when the journal does not have it.
  std::optional<stored_slice> read(const std::string& job_id, uint64_t from, uint64_t max);
  /// The database file's size plus its WAL's, in bytes.
  int64_t disk_bytes() const;

private:
  void close();
  void open_connection(int flags);
  void close_connection();
  void create_fresh();
  void check_file(const std::string& move_away);
  void store_crash_runs();
  struct job_writes;
  int write_job(const std::string& id, const job_writes& w, double now_unix, std::string& why);
  void exec(const char* sql);
  [[noreturn]] void fail(const std::string& what) const;
  sqlite3_stmt* prepare(const char* sql);

  std::string path_;
  sync_mode mode_;
  bool writable_ = false;
  std::vector<std::pair<std::string, int32_t>> pending_crash_runs_;  // from load(), stored by open_for_writing
  sqlite3* db_ = nullptr;
  int lock_fd_ = -1;
  int64_t epoch_ = 0;
  sqlite3_stmt* insert_job_ = nullptr;
  sqlite3_stmt* clear_events_ = nullptr;
  sqlite3_stmt* insert_event_ = nullptr;
  sqlite3_stmt* end_job_ = nullptr;
  sqlite3_stmt* mark_running_ = nullptr;
  sqlite3_stmt* mark_cancelled_ = nullptr;
};

} // namespace conveyor::journal
