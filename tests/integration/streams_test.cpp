// Real sockets on loopback: many concurrent jobs stream completely and in order, with the same
// greedy text as the executor alone; cancel, late join + fetch, PUSH, stream:false, stop
// strings, deadlines and priorities.
#include <boost/test/unit_test.hpp>

#include <thread>

#include "model/cpu/cpu_executor.hpp"
#include "server_fixture.hpp"

namespace conveyor::testing {
namespace {

// What `conveyor generate` prints for `prompt` greedily: the executor alone, one sequence.
std::string reference_text(const std::string& prompt, int32_t max_tokens) {
  const auto& m = smollm2::get();
  model::cpu_executor_options o;
  o.num_kv_blocks = 64;
  model::cpu_executor ex(*m.file, o);
  scheduled_seq s;
  s.id = 1;
  s.tokens = m.tok->encode(prompt, false);
  s.sampling.temperature = 0;
  s.sample = true;
  for (int b = 0; b < 64; ++b) s.block_table.push_back(b);
  std::vector<token_id> out;
  while (static_cast<int32_t>(out.size()) < max_tokens) {
    step_plan p;
    p.seqs.push_back(s);
    const token_id t = ex.step(p).sampled.at(0).token;
    if (m.tok->is_eog(t)) break;
    out.push_back(t);
    s.num_computed_tokens += static_cast<int32_t>(s.tokens.size());
    s.tokens = {t};
  }
  return m.tok->decode(out);
}

json submit(const std::string& id, const std::string& prompt, int max_tokens, json extra = json::object()) {
  json m = {{"op", "submit"}, {"id", id}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  m.update(extra);
  return m;
}

} // namespace

BOOST_AUTO_TEST_SUITE(streams)

BOOST_AUTO_TEST_CASE(sixty_four_jobs_from_four_producers_stream_completely) {
  const std::vector<std::string> prompts = {"The capital of France is", "def add(a, b):", "1, 2, 3, 4,", "Once upon a time",
                                            "Le chat est", "The best way to learn", "Water boils at", "import numpy as np\n"};
  std::vector<std::string> want;
  for (const auto& p : prompts) want.push_back(reference_text(p, 12));
  server srv;
  struct outcome { std::string id, text; std::vector<json> events; };
  std::vector<std::vector<outcome>> results(4);
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p)
    producers.emplace_back([&, p] {
      producer c(*srv.rt);
      for (int j = 0; j < 16; ++j) {
        const std::string id = "p" + std::to_string(p) + "/j" + std::to_string(j);
        c.subscribe(id);
        const json r = c.request(submit(id, prompts[(p * 16 + j) % prompts.size()], 12));
        if (r["ok"] != true) throw std::runtime_error("submit refused: " + r.dump());
      }
      for (int j = 0; j < 16; ++j) {
        const std::string id = "p" + std::to_string(p) + "/j" + std::to_string(j);
        results[p].push_back({id, prompts[(p * 16 + j) % prompts.size()], c.collect(id)});
      }
    });
  for (auto& t : producers) t.join();
  int done = 0;
  for (const auto& per_producer : results)
    for (const auto& o : per_producer) {
      BOOST_TEST_CONTEXT("job " << o.id) {
        const std::string text = check_stream(o.events);
        const size_t k = std::find(prompts.begin(), prompts.end(), o.text) - prompts.begin();
        BOOST_TEST(text == want[k]);
        BOOST_TEST(o.events.back()["text"].get<std::string>() == want[k]);
        done += o.events.back()["kind"] == "done";
      }
    }
  BOOST_TEST(done == 64);
}

BOOST_AUTO_TEST_CASE(cancel_mid_stream_ends_with_cancelled) {
  server srv;
  producer c(*srv.rt);
  c.subscribe("long");
  BOOST_REQUIRE(c.request(submit("long", "Tell me a story", 400, {{"ignore_eos", true}}))["ok"] == true);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const json r = c.request({{"op", "cancel"}, {"id", "long"}});
  BOOST_TEST(r["ok"] == true);
  BOOST_TEST(r["state"] == "cancelled");
  const auto events = c.collect("long");
  check_stream(events);
  BOOST_TEST(events.back()["finish_reason"] == "cancelled");
  BOOST_TEST(events.back()["usage"]["completion_tokens"].get<int>() < 400);
  BOOST_TEST(c.request({{"op", "cancel"}, {"id", "long"}})["state"] == "cancelled");  // idempotent
}

BOOST_AUTO_TEST_CASE(late_subscriber_is_repaired_by_fetch) {
  server srv;
  producer c(*srv.rt);
  BOOST_REQUIRE(c.request(submit("late", "Water boils at", 10))["ok"] == true);  // nobody subscribed
  json st;
  for (int i = 0; i < 1200 && (st = c.request({{"op", "status"}, {"id", "late"}}))["state"] != "finished"; ++i)  // 60 s: slow builds (ASan)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_TEST(st["state"] == "finished");
  const json f = c.request({{"op", "fetch"}, {"id", "late"}, {"from_seq", 0}, {"max_events", 100}});
  BOOST_TEST(f["complete"] == true);
  const auto events = f["events"].get<std::vector<json>>();
  BOOST_TEST(check_stream(events) == reference_text("Water boils at", 10));
  BOOST_TEST(st["next_seq"].get<size_t>() == events.size());
  const json tail = c.request({{"op", "fetch"}, {"id", "late"}, {"from_seq", 2}, {"max_events", 1}});
  BOOST_TEST(tail["events"].size() == 1u);
  BOOST_TEST(tail["events"][0]["seq"] == 2);
  BOOST_TEST(tail["complete"] == false);
}

BOOST_AUTO_TEST_CASE(push_path_publishes_acceptance_and_rejection_as_events) {
  server srv;
  producer c(*srv.rt);
  c.subscribe("pushed");
  c.subscribe("pushed-bad");
  c.push(submit("pushed", "Once upon a time", 6));
  c.push(submit("pushed-bad", "Once upon a time", 0));
  const auto ok = c.collect("pushed");
  check_stream(ok);
  BOOST_TEST(ok.back()["kind"] == "done");
  const auto bad = c.collect("pushed-bad", std::chrono::seconds(5));
  BOOST_REQUIRE(bad.size() == 1u);
  BOOST_TEST(bad[0]["kind"] == "error");
  BOOST_TEST(bad[0]["code"] == "bad_request");
  BOOST_TEST(bad[0]["seq"] == 0);
}

BOOST_AUTO_TEST_CASE(stream_false_sends_only_accepted_and_done) {
  server srv;
  producer c(*srv.rt);
  c.subscribe("quiet");
  BOOST_REQUIRE(c.request(submit("quiet", "Once upon a time", 8, {{"stream", false}}))["ok"] == true);
  const auto events = c.collect("quiet");
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0]["kind"] == "accepted");
  BOOST_TEST(events[1]["kind"] == "done");
  BOOST_TEST(events[1]["text"].get<std::string>() == reference_text("Once upon a time", 8));
}

BOOST_AUTO_TEST_CASE(stop_string_ends_text_before_it) {
  const std::string full = reference_text("The capital of France is", 16);
  const size_t dot = full.find('.');
  BOOST_REQUIRE_MESSAGE(dot != std::string::npos, "reference text has no '.': " << full);
  server srv;
  producer c(*srv.rt);
  c.subscribe("stop");
  BOOST_REQUIRE(c.request(submit("stop", "The capital of France is", 16, {{"stop", {"."}}}))["ok"] == true);
  const auto events = c.collect("stop");
  BOOST_TEST(check_stream(events) == full.substr(0, dot));
  BOOST_TEST(events.back()["text"] == full.substr(0, dot));
  BOOST_TEST(events.back()["finish_reason"] == "stop");
}

BOOST_AUTO_TEST_CASE(deadline_stops_a_job) {
  server srv;
  producer c(*srv.rt);
  c.subscribe("dl");
  BOOST_REQUIRE(c.request(submit("dl", "Tell me a story", 400, {{"ignore_eos", true}, {"deadline_ms", 400}}))["ok"] == true);
  const auto events = c.collect("dl");
  check_stream(events);
  BOOST_TEST(events.back()["finish_reason"] == "deadline");
  BOOST_TEST(events.back()["timing"]["e2e_ms"].get<double>() >= 400.0);
}

BOOST_AUTO_TEST_CASE(priority_policy_runs_lower_values_first) {
  server srv("cpu", [](serve::runtime_options& o) {
    o.sched.policy = scheduling_policy::priority;
    o.sched.max_num_seqs = 1;
  });
  producer c(*srv.rt);
  for (const char* id : {"first", "low", "high"}) c.subscribe(id);
  // "first" holds the only slot long enough for both others to queue behind it.
  BOOST_REQUIRE(c.request(submit("first", "Once upon a time", 60, {{"ignore_eos", true}}))["ok"] == true);
  BOOST_REQUIRE(c.request(submit("low", "Once upon a time", 10, {{"ignore_eos", true}, {"priority", 5}}))["ok"] == true);
  BOOST_REQUIRE(c.request(submit("high", "Once upon a time", 10, {{"ignore_eos", true}, {"priority", -5}}))["ok"] == true);
  check_stream(c.collect("high"));
  BOOST_TEST(c.request({{"op", "status"}, {"id", "low"}})["state"] != "finished");
  check_stream(c.collect("low"));
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
