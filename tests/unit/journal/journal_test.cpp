// The journal file: what a commit stores is what load() and read() give back after reopening;
// crash counts per epoch; pruning; and every bad file (corrupt, foreign, newer, unreadable,
// locked) refused with one line naming the file, never overwritten.
#include <boost/test/unit_test.hpp>

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "journal/journal.hpp"

using namespace conveyor::journal;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    char tmpl[] = "/tmp/conveyor-journal-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string file() const { return journal::file_in(path.string()); }
};

bytes b(std::initializer_list<uint8_t> v) { return bytes(v); }

write_batch accept(const std::string& id, double arrival) {
  write_batch w;
  w.jobs.push_back({id, b({1, 2, 3}), arrival});
  w.events.push_back({id, 0, b({0xa0}), false});
  return w;
}

// The error journal(path) throws, or "" when it opens.
std::string open_error(const std::string& path) {
  try {
    journal j(path, sync_mode::process);
    return "";
  } catch (const journal_error& e) {
    return e.what();
  }
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

} // namespace

BOOST_AUTO_TEST_SUITE(journal_file)

BOOST_AUTO_TEST_CASE(committed_jobs_and_events_survive_reopening) {
  temp_dir d;
  {
    journal j(d.file(), sync_mode::power);
    BOOST_TEST(j.epoch() == 1);
    j.commit(accept("a", 10.0));
    j.commit(accept("b", 11.0));
    write_batch w;
    w.events.push_back({"a", 1, b({7}), false});
    w.events.push_back({"a", 2, b({8}), true});
    w.events.push_back({"b", 1, b({9}), false});
    w.now_unix = 20.0;
    j.commit(w);
  }
  journal j(d.file(), sync_mode::process);
  BOOST_TEST(j.epoch() == 2);
  auto jobs = j.load();
  BOOST_TEST_REQUIRE(jobs.size() == 2u);
  BOOST_TEST(jobs[0].job_id == "a");
  BOOST_TEST(jobs[0].ended_unix.value() == 20.0);
  BOOST_TEST_REQUIRE(jobs[0].events.size() == 1u);  // an ended job: its terminal event alone
  BOOST_TEST((jobs[0].events[0] == b({8})));
  BOOST_TEST(jobs[1].job_id == "b");
  BOOST_TEST(!jobs[1].ended_unix.has_value());
  BOOST_TEST((jobs[1].request == b({1, 2, 3})));
  BOOST_TEST(jobs[1].arrival_unix == 11.0);
  BOOST_TEST_REQUIRE(jobs[1].events.size() == 2u);
  BOOST_TEST((jobs[1].events[1] == b({9})));
  auto slice = j.read("a", 1, 10);
  BOOST_TEST_REQUIRE(slice.has_value());
  BOOST_TEST(slice->ended);
  BOOST_TEST(slice->next_seq == 3u);
  BOOST_TEST_REQUIRE(slice->events.size() == 2u);
  BOOST_TEST(!j.read("nope", 0, 10).has_value());
}

// A job whose writes break a constraint (an event seq stored twice) is left out of the commit,
// all its writes of the batch; the other jobs' writes are stored, and nothing throws (issue 26:
// one such write used to stop the whole server).
BOOST_AUTO_TEST_CASE(a_job_whose_writes_break_a_constraint_is_left_out_alone) {
  temp_dir d;
  journal j(d.file(), sync_mode::process);
  j.commit(accept("a", 1.0));
  write_batch w = accept("c", 2.0);
  w.events.push_back({"a", 1, b({6}), false});  // fine on its own
  w.events.push_back({"a", 0, b({5}), false});  // seq 0 of "a" exists
  w.running.push_back("a");
  std::vector<refused_job> refused;
  BOOST_REQUIRE_NO_THROW(refused = j.commit(w));
  BOOST_TEST_REQUIRE(refused.size() == 1u);
  BOOST_TEST(refused[0].job_id == "a");
  BOOST_TEST(refused[0].why.find("UNIQUE") != std::string::npos, refused[0].why);
  auto jobs = j.load();
  BOOST_TEST_REQUIRE(jobs.size() == 2u);
  BOOST_TEST(jobs[0].job_id == "a");
  BOOST_TEST(jobs[0].events.size() == 1u, "none of a's writes of the refused batch may be stored");
  BOOST_TEST(jobs[1].job_id == "c");
  BOOST_TEST(jobs[1].events.size() == 1u);
}

// A job accepted under the id of an ended job the journal still holds (the server forgot it
// after --retention, the journal had not pruned it yet): the new job replaces it, its events
// from seq 0, instead of a UNIQUE failure (issue 26, defect 2).
BOOST_AUTO_TEST_CASE(a_new_job_replaces_an_ended_job_of_the_same_id) {
  temp_dir d;
  journal j(d.file(), sync_mode::process);
  write_batch w = accept("again", 1.0);
  w.events.push_back({"again", 1, b({7}), false});
  w.events.push_back({"again", 2, b({8}), true});
  j.commit(w);
  write_batch second = accept("again", 100.0);
  second.events[0].body = b({0xa1});
  BOOST_TEST(j.commit(second).empty());
  auto jobs = j.load();
  BOOST_TEST_REQUIRE(jobs.size() == 1u);
  BOOST_TEST(!jobs[0].ended_unix.has_value(), "the new job has not ended");
  BOOST_TEST(jobs[0].arrival_unix == 100.0);
  BOOST_TEST_REQUIRE(jobs[0].events.size() == 1u, "the old job's events must be gone");
  BOOST_TEST(jobs[0].events[0] == b({0xa1}), boost::test_tools::per_element());
}

// A disk-level failure still fails the whole batch: nothing of it is stored.
BOOST_AUTO_TEST_CASE(a_failed_transaction_stores_nothing_of_its_batch) {
  temp_dir d;
  journal j(d.file(), sync_mode::process);
  j.commit(accept("a", 1.0));
  {
    sqlite3* db = nullptr;  // a second writer holds the write lock: BEGIN IMMEDIATE fails (busy)
    BOOST_REQUIRE(sqlite3_open(d.file().c_str(), &db) == SQLITE_OK);
    BOOST_REQUIRE(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
    BOOST_CHECK_THROW(j.commit(accept("c", 2.0)), journal_error);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto jobs = j.load();
  BOOST_TEST_REQUIRE(jobs.size() == 1u);
  BOOST_TEST(jobs[0].job_id == "a");
}

BOOST_AUTO_TEST_CASE(crash_runs_count_consecutive_epochs_a_job_was_running_in) {
  temp_dir d;
  {
    journal j(d.file(), sync_mode::process);  // epoch 1
    j.commit(accept("run", 1.0));
    j.commit(accept("wait", 2.0));
    write_batch w;
    w.running = {"run"};
    j.commit(w);
  }
  {
    journal j(d.file(), sync_mode::process);  // epoch 2: "run" ran in epoch 1
    auto jobs = j.load();
    BOOST_TEST(jobs[0].crash_runs == 1);
    BOOST_TEST(jobs[1].crash_runs == 0);
    write_batch w;
    w.running = {"run"};
    j.commit(w);
  }
  {
    journal j(d.file(), sync_mode::process);  // epoch 3 (a start: load, then writing, as the runtime does)
    BOOST_TEST(j.load()[0].crash_runs == 2);
    j.open_for_writing();
  }
  journal j(d.file(), sync_mode::process);  // epoch 4: it did not run in epoch 3
  BOOST_TEST(j.load()[0].crash_runs == 0);
}

BOOST_AUTO_TEST_CASE(prune_deletes_ended_jobs_past_retention_and_beyond_the_count) {
  temp_dir d;
  journal j(d.file(), sync_mode::process);
  for (int i = 0; i < 5; ++i) {
    const std::string id = "j" + std::to_string(i);
    write_batch w = accept(id, i);
    w.events.push_back({id, 1, b({1}), true});
    w.now_unix = 100.0 + i;
    j.commit(w);
  }
  j.commit(accept("open", 50.0));
  BOOST_TEST(j.prune(101.5, 100) == 2u);  // j0, j1 ended before 101.5
  BOOST_TEST(j.prune(0.0, 2) == 1u);      // of j2..j4, the oldest beyond two
  auto jobs = j.load();
  BOOST_TEST_REQUIRE(jobs.size() == 3u);  // open, j3, j4
  BOOST_TEST(!j.read("j2", 0, 10).has_value());
  BOOST_TEST(j.read("j4", 0, 10).has_value());
  BOOST_TEST(j.read("open", 0, 10).has_value());
}

BOOST_AUTO_TEST_CASE(a_corrupt_file_is_refused_and_left_as_it_was) {
  temp_dir d;
  { std::ofstream(d.file()) << "this is not a database, it is a text file of some length............................................"; }
  const std::string before = contents(d.file());
  const std::string e = open_error(d.file());
  BOOST_TEST(e.find(d.file()) != std::string::npos);
  BOOST_TEST(e.find("not a conveyor journal") != std::string::npos);
  BOOST_TEST(e.find("--state-dir") != std::string::npos);
  BOOST_TEST(e.find('\n') == std::string::npos);
  BOOST_TEST(contents(d.file()) == before);
}

BOOST_AUTO_TEST_CASE(a_damaged_journal_fails_the_integrity_check) {
  temp_dir d;
  {
    journal j(d.file(), sync_mode::process);
    for (int i = 0; i < 300; ++i) j.commit(accept("job-" + std::to_string(i), i));
  }
  // Overwrite a page in the middle of the file (past the header and schema pages).
  const auto size = fs::file_size(d.file());
  BOOST_TEST_REQUIRE(size > 8192u);
  {
    std::fstream f(d.file(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    const std::string junk(4096, '\xff');
    f.write(junk.data(), junk.size());
  }
  const std::string e = open_error(d.file());
  BOOST_TEST(e.find(d.file()) != std::string::npos);
  BOOST_TEST((e.find("corrupt") != std::string::npos || e.find("not a conveyor journal") != std::string::npos), e);
}

// An existing empty file is a journal that lost its contents, not a new journal (issue 26,
// defect 3: it used to start empty, its jobs gone without a word).
BOOST_AUTO_TEST_CASE(an_empty_file_is_refused_not_started_afresh) {
  temp_dir d;
  { std::ofstream(d.file()); }
  const std::string e = open_error(d.file());
  BOOST_TEST(e.find(d.file()) != std::string::npos, e);
  BOOST_TEST(e.find("empty") != std::string::npos, e);
  BOOST_TEST(e.find("--state-dir") != std::string::npos, e);
  BOOST_TEST(fs::file_size(d.file()) == 0u);
  // Where no file exists, a journal is created (whole: no temporary file is left).
  fs::remove(d.file());
  { journal j(d.file(), sync_mode::process); }
  BOOST_TEST(fs::file_size(d.file()) > 0u);
  BOOST_TEST(!fs::exists(d.file() + ".new"));
}

// A damaged journal with a WAL beside it: the refused start leaves both files byte for byte as
// they were (issue 26, defect 4: the WAL used to be merged into the file and deleted).
BOOST_AUTO_TEST_CASE(a_refused_journal_and_its_wal_are_left_untouched) {
  temp_dir d;
  temp_dir crashed;  // the files as a kill -9 leaves them: the WAL not yet merged
  {
    journal j(d.file(), sync_mode::process);
    for (int i = 0; i < 300; ++i) j.commit(accept("old-" + std::to_string(i), i));
    sqlite3* db = nullptr;  // the first 300 into the file, the last 40 in the WAL
    BOOST_REQUIRE(sqlite3_open(d.file().c_str(), &db) == SQLITE_OK);
    BOOST_REQUIRE(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    for (int i = 0; i < 40; ++i) j.commit(accept("job-" + std::to_string(i), 1000 + i));
    fs::copy_file(d.file(), crashed.file());
    fs::copy_file(d.file() + "-wal", crashed.file() + "-wal");
  }
  BOOST_TEST_REQUIRE(fs::file_size(crashed.file() + "-wal") > 0u);
  for (const std::string damage : {"truncate", "garbage"}) {
    temp_dir t;
    fs::copy_file(crashed.file(), t.file());
    fs::copy_file(crashed.file() + "-wal", t.file() + "-wal");
    if (damage == "truncate") {
      fs::resize_file(t.file(), fs::file_size(t.file()) / 2);
    } else {
      std::fstream f(t.file(), std::ios::in | std::ios::out | std::ios::binary);
      const std::string junk(100, '\x5a');
      f.write(junk.data(), junk.size());  // over the header
    }
    const std::string main_before = contents(t.file()), wal_before = contents(t.file() + "-wal");
    const std::string e = open_error(t.file());
    BOOST_TEST(!e.empty(), damage << ": a damaged journal must be refused");
    BOOST_TEST(fs::exists(t.file() + "-wal"), damage << ": the WAL must not be deleted");
    BOOST_TEST((contents(t.file() + "-wal") == wal_before), damage << ": the WAL must be unchanged");
    BOOST_TEST((contents(t.file()) == main_before), damage << ": the journal file must be unchanged");
  }
  // The undamaged copy opens, and its jobs (in the WAL) are all there.
  journal j(crashed.file(), sync_mode::process);
  BOOST_TEST(j.load().size() == 340u);
}

// A journal whose file is sound but whose jobs cannot be resumed (a job without events) is
// refused by load(), and left untouched too: nothing is written before open_for_writing().
BOOST_AUTO_TEST_CASE(a_journal_refused_while_loading_is_left_untouched) {
  temp_dir d, crashed;
  {
    journal j(d.file(), sync_mode::process);
    for (int i = 0; i < 5; ++i) j.commit(accept("job-" + std::to_string(i), i));
    sqlite3* db = nullptr;
    BOOST_REQUIRE(sqlite3_open(d.file().c_str(), &db) == SQLITE_OK);
    BOOST_REQUIRE(sqlite3_exec(db, "DELETE FROM events WHERE job_id='job-3'", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    fs::copy_file(d.file(), crashed.file());
    fs::copy_file(d.file() + "-wal", crashed.file() + "-wal");
  }
  const std::string main_before = contents(crashed.file()), wal_before = contents(crashed.file() + "-wal");
  {
    journal j(crashed.file(), sync_mode::process);
    BOOST_CHECK_THROW(j.load(), journal_error);
  }
  BOOST_TEST((contents(crashed.file()) == main_before), "the journal file must be unchanged");
  BOOST_TEST(fs::exists(crashed.file() + "-wal"), "the WAL must not be deleted");
  BOOST_TEST((contents(crashed.file() + "-wal") == wal_before), "the WAL must be unchanged");
}

BOOST_AUTO_TEST_CASE(a_foreign_sqlite_file_and_a_newer_journal_are_refused) {
  temp_dir d;
  sqlite3* db = nullptr;
  sqlite3_open(d.file().c_str(), &db);
  sqlite3_exec(db, "CREATE TABLE photos(id INTEGER)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  std::string e = open_error(d.file());
  BOOST_TEST(e.find("another program") != std::string::npos, e);
  fs::remove(d.file());
  { journal j(d.file(), sync_mode::process); }
  sqlite3_open(d.file().c_str(), &db);
  sqlite3_exec(db, "UPDATE meta SET value=99 WHERE key='version'", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  e = open_error(d.file());
  BOOST_TEST(e.find("newer conveyor") != std::string::npos, e);
}

BOOST_AUTO_TEST_CASE(a_journal_in_use_and_an_unwritable_directory_are_refused) {
  temp_dir d;
  journal first(d.file(), sync_mode::process);
  std::string e = open_error(d.file());
  BOOST_TEST(e.find("in use by another conveyor") != std::string::npos, e);
  if (geteuid() != 0) {  // root writes anywhere
    fs::create_directory(d.path / "ro");
    fs::permissions(d.path / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    e = open_error(journal::file_in((d.path / "ro" / "sub").string()));
    BOOST_TEST(e.find("--state-dir") != std::string::npos, e);
  }
  e = open_error("/proc/version/journal.db");  // a directory that cannot exist
  BOOST_TEST(e.find("/proc/version/journal.db") != std::string::npos, e);
}

BOOST_AUTO_TEST_SUITE_END()
