// The job journal across restarts, in process: a server stopped and started again on the same
// journal remembers finished jobs (duplicate, status, fetch byte for byte), resumes a job whose
// events stop midway (as a kill -9 leaves it: the stream goes on at the next seq, the done text
// is the whole output), ends a job whose output was complete without running it, ends a poison
// job with an error; `conveyor serve` refuses a bad journal with exit 2. The kill -9 itself is
// tested in clients/python/tests/test_chaos.py.
#include <boost/test/unit_test.hpp>

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <thread>

#include "journal/journal.hpp"
#include "schemas/events.hpp"
#include "schemas/stored.hpp"
#include "server_fixture.hpp"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;

struct state_dir {
  fs::path path;
  state_dir() {
    char tmpl[] = "/tmp/conveyor-jr-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~state_dir() { fs::remove_all(path); }
  std::string file() const { return journal::journal::file_in(path.string()); }
  // A server tweak that opens this journal.
  std::function<void(serve::runtime_options&)> on() const {
    return [f = file()](serve::runtime_options& o) { o.journal = std::make_shared<journal::journal>(f, journal::sync_mode::process); };
  }
  // Runs SQL on the journal file (no server may hold it).
  void sql(const std::string& statement) const {
    sqlite3* db = nullptr;
    BOOST_REQUIRE(sqlite3_open(file().c_str(), &db) == SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err);
    BOOST_TEST(rc == SQLITE_OK, statement << ": " << (err ? err : ""));
    sqlite3_free(err);
    sqlite3_close(db);
  }
};

json submit_map(const std::string& id, int max_tokens, bool ignore_eos = true) {
  return {{"op", "submit"}, {"id", id}, {"prompt", "The capital of France is"}, {"max_tokens", max_tokens},
          {"temperature", 0}, {"ignore_eos", ignore_eos}};
}

json fetch_all(producer& p, const std::string& id) {
  return p.request({{"op", "fetch"}, {"id", id}, {"from_seq", 0}, {"max_events", 4096}});
}

// A job that started with the server (resumed): its whole stream once fetch has it complete.
std::vector<json> fetch_when_complete(producer& p, const std::string& id) {
  for (int i = 0; i < 1200; ++i) {
    const json f = fetch_all(p, id);
    if (f["ok"] == true && f["complete"] == true) return f["events"].get<std::vector<json>>();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  BOOST_FAIL("job " << id << " did not end within 60 s");
  return {};
}

// Runs `id` to its end on a fresh server (journal `d`) and returns its events.
std::vector<json> run_job(const state_dir& d, const std::string& executor, const std::string& id, int max_tokens) {
  server s(executor, d.on());
  producer p(*s.rt);
  p.subscribe(id);
  BOOST_TEST_REQUIRE(p.request(submit_map(id, max_tokens))["ok"] == true);
  auto events = p.collect(id);
  check_stream(events);
  return events;
}

} // namespace

BOOST_AUTO_TEST_SUITE(journal_restart)

BOOST_AUTO_TEST_CASE(finished_jobs_are_remembered_and_fetchable_after_a_restart) {
  state_dir d;
  const std::vector<json> before = run_job(d, "null", "kept", 5);
  server s("null", d.on());
  BOOST_TEST(s.rt->recovered().finished == 1u);
  producer p(*s.rt);
  const json again = p.request(submit_map("kept", 5));
  BOOST_TEST(again["ok"] == false);
  BOOST_TEST(again["error"]["code"] == "duplicate", again.dump());
  const json st = p.request({{"op", "status"}, {"id", "kept"}});
  BOOST_TEST(st["state"] == "finished", st.dump());
  BOOST_TEST(st["next_seq"] == before.size());
  BOOST_TEST(st["completion_tokens"] == 5);
  const json f = fetch_all(p, "kept");
  BOOST_TEST(f["complete"] == true);
  BOOST_TEST((f["events"].get<std::vector<json>>() == before));
  // A new id still runs.
  p.subscribe("fresh");
  BOOST_TEST(p.request(submit_map("fresh", 3))["ok"] == true);
  check_stream(p.collect("fresh"));
}

// A job whose last events were never stored (the server died): it continues at the next seq,
// recomputing its published output as prompt; the done text is the whole output.
BOOST_AUTO_TEST_CASE(a_job_cut_off_midway_resumes_at_the_next_seq) {
  state_dir d;
  const std::vector<json> full = run_job(d, "cpu", "cut", 12);
  const std::string full_text = check_stream(full);
  // Keep accepted + 5 tokens events: as if the server died after publishing seq 5.
  d.sql("DELETE FROM events WHERE job_id='cut' AND seq > 5; UPDATE jobs SET ended_unix=NULL WHERE job_id='cut';");
  server s("cpu", d.on());
  BOOST_TEST(s.rt->recovered().resumed == 1u);
  producer p(*s.rt);
  const json dup = p.request(submit_map("cut", 12));
  BOOST_TEST(dup["error"]["code"] == "duplicate", dup.dump());
  const std::vector<json> events = fetch_when_complete(p, "cut");
  const std::string text = check_stream(events);
  BOOST_TEST_REQUIRE(events.size() >= 7u);
  for (size_t i = 0; i <= 5; ++i) BOOST_TEST((events[i] == full[i]), "seq " << i << " was changed");
  const json& done = events.back();
  BOOST_TEST(done["kind"] == "done");
  BOOST_TEST(done["text"] == text);
  BOOST_TEST(done["finish_reason"] == "length");
  BOOST_TEST(done["usage"]["completion_tokens"] == 12);
  BOOST_TEST(done["usage"]["prompt_tokens"] == full.back()["usage"]["prompt_tokens"]);
  size_t ids = 0;
  for (const auto& e : events)
    if (e["kind"] == "tokens") ids += e["token_ids"].size();
  BOOST_TEST(ids == 12u);
  BOOST_TEST_MESSAGE("resumed text " << (text == full_text ? "equals" : "differs from") << " the uninterrupted run's");
  const json st = p.request({{"op", "status"}, {"id", "cut"}});
  BOOST_TEST(st["completion_tokens"] == 12, st.dump());
}

// Every token was published but not the done event: it ends at once, without running.
BOOST_AUTO_TEST_CASE(a_job_whose_output_was_complete_ends_without_running) {
  state_dir d;
  const std::vector<json> full = run_job(d, "null", "whole", 4);
  const size_t last = full.size() - 1;  // the done event's seq
  d.sql("DELETE FROM events WHERE job_id='whole' AND seq = " + std::to_string(last) +
        "; UPDATE jobs SET ended_unix=NULL WHERE job_id='whole';");
  server s("null", d.on());
  producer p(*s.rt);
  const std::vector<json> events = fetch_when_complete(p, "whole");
  const std::string text = check_stream(events);
  BOOST_TEST_REQUIRE(events.size() == full.size());
  BOOST_TEST(events.back()["finish_reason"] == "length");
  BOOST_TEST(events.back()["text"] == text);
  BOOST_TEST(events.back()["usage"]["completion_tokens"] == 4);
  BOOST_TEST(p.request({{"op", "status"}, {"id", "whole"}})["state"] == "finished");
  BOOST_TEST(p.request(submit_map("whole", 4))["error"]["code"] == "duplicate");
}

// A cancel was acknowledged (stored) but its done event was not: it ends as cancelled.
BOOST_AUTO_TEST_CASE(an_acknowledged_cancel_holds_across_a_restart) {
  state_dir d;
  const std::vector<json> full = run_job(d, "null", "stopme", 6);
  d.sql("DELETE FROM events WHERE job_id='stopme' AND seq > 2; UPDATE jobs SET ended_unix=NULL, cancelled=1 WHERE job_id='stopme';");
  server s("null", d.on());
  producer p(*s.rt);
  const std::vector<json> events = fetch_when_complete(p, "stopme");
  const std::string text = check_stream(events);
  BOOST_TEST_REQUIRE(events.size() == 4u);
  BOOST_TEST(events.back()["finish_reason"] == "cancelled");
  BOOST_TEST(events.back()["text"] == text);
  BOOST_TEST(p.request({{"op", "status"}, {"id", "stopme"}})["state"] == "cancelled");
}

// Running in two consecutive crashed incarnations: it ends with an `internal` error instead.
BOOST_AUTO_TEST_CASE(a_poison_job_ends_with_an_error) {
  state_dir d;
  schemas::submit_request job;
  job.id = "poison";
  job.input = std::string("hello");
  job.max_tokens = 4;
  for (int crash = 0; crash < 2; ++crash) {
    journal::journal j(d.file(), journal::sync_mode::process);
    (void)j.load();
    journal::write_batch w;
    if (crash == 0) {
      w.jobs.push_back({"poison", schemas::encode(job), 1.0});
      schemas::accepted_event acc;
      acc.id = "poison";
      w.events.push_back({"poison", 0, schemas::encode(acc), false});
    }
    w.running.push_back("poison");
    j.commit(w);
  }
  server s("null", d.on());
  BOOST_TEST(s.rt->recovered().poisoned == 1u);
  producer p(*s.rt);
  const std::vector<json> events = fetch_when_complete(p, "poison");
  check_stream(events);
  BOOST_TEST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[1]["kind"] == "error");
  BOOST_TEST(events[1]["code"] == "internal");
  BOOST_TEST(events[1]["message"].get<std::string>().find("consecutive crashes") != std::string::npos, events[1].dump());
  BOOST_TEST(p.request({{"op", "status"}, {"id", "poison"}})["state"] == "failed");
  BOOST_TEST(p.request(submit_map("poison", 4))["error"]["code"] == "duplicate");
}

// An id reused after --retention: the server has forgotten the job, the journal still holds it
// (it prunes every few seconds). The new job runs and is stored from seq 0, its fetch gives its
// own events alone; before, its first write broke the journal's UNIQUE(job, seq) and stopped
// the server for everyone (issue 26, defect 2). Both within one run and across a restart.
BOOST_AUTO_TEST_CASE(an_id_reused_past_retention_runs_again_and_is_stored_afresh) {
  state_dir d;
  auto tweak = [on = d.on()](serve::runtime_options& o) {
    on(o);
    o.pub.retention_s = 0.3;
  };
  auto run_again = [](producer& p, const std::string& id, int max_tokens) {
    const json r = p.request(submit_map(id, max_tokens));
    BOOST_TEST_REQUIRE(r["ok"] == true, r.dump());
    auto events = p.collect(id);
    check_stream(events);
    BOOST_TEST(events.back()["usage"]["completion_tokens"] == max_tokens, events.back().dump());
    const json f = fetch_all(p, id);
    BOOST_TEST(f["complete"] == true, f.dump());
    BOOST_TEST((f["events"].get<std::vector<json>>() == events), "fetch must give the new job's events alone");
  };
  {
    server s("null", tweak);
    producer p(*s.rt);
    p.subscribe("reused");
    run_again(p, "reused", 6);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    run_again(p, "reused", 3);  // same run: the table forgot it, the journal did not
    BOOST_TEST(p.request({{"op", "health"}})["ok"] == true);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  server s("null", tweak);  // the journal still holds the ended job; the table does not keep it
  producer p(*s.rt);
  p.subscribe("reused");
  run_again(p, "reused", 4);
  p.subscribe("other");
  run_again(p, "other", 2);  // and the server goes on
}

// `conveyor serve` with a journal it cannot use: one line naming the file and the fix, exit 2,
// and the file left as it was.
BOOST_AUTO_TEST_CASE(serve_refuses_a_bad_journal_with_exit_2) {
  state_dir d;
  { std::ofstream(d.file()) << std::string(5000, 'x'); }
  const fs::path out = d.path / "out.txt";
  auto serve = [&](const std::string& args) {
    const int status = std::system((std::string(CONVEYOR_BINARY_DIR) + "/conveyor serve --device null --router tcp://127.0.0.1:* "
                                    "--pub tcp://127.0.0.1:* --pull tcp://127.0.0.1:* " + args + " >" + out.string() + " 2>&1")
                                       .c_str());
    std::ifstream in(out);
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::string(std::istreambuf_iterator<char>(in), {}));
  };
  auto [code, text] = serve("--state-dir " + d.path.string());
  BOOST_TEST(code == 2, text);
  BOOST_TEST(text.find(d.file()) != std::string::npos, text);
  BOOST_TEST(text.find("--state-dir") != std::string::npos, text);
  BOOST_TEST(std::count(text.begin(), text.end(), '\n') == 1, text);
  BOOST_TEST(fs::file_size(d.file()) == 5000u);
  std::tie(code, text) = serve("--journal-sync sometimes");
  BOOST_TEST(code == 2, text);
  BOOST_TEST(text.find("journal") != std::string::npos, text);
  std::tie(code, text) = serve("--state-dir /proc/version/state");
  BOOST_TEST(code == 2, text);
  BOOST_TEST(text.find("/proc/version/state") != std::string::npos, text);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
