// Every bad message gets its documented error reply while another job keeps streaming; queue
// bounds answer `overloaded` and every accepted job still finishes; a drain ends every job.
#include <boost/test/unit_test.hpp>

#include <thread>

#include "server_fixture.hpp"

namespace conveyor::testing {
namespace {

std::string bytes_of(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

// Polls `status` until the job has more than `n` output tokens (event-driven, no fixed sleep:
// a Debug/ASan build is many times slower). Returns the count seen.
int wait_for_tokens(producer& c, const std::string& id, int n) {
  for (int i = 0; i < 2400; ++i) {
    const json st = c.request({{"op", "status"}, {"id", id}});
    if (st["completion_tokens"].get<int>() > n) return st["completion_tokens"].get<int>();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return n;
}

std::string msgpack_of(const json& j) {
  const auto v = json::to_msgpack(j);
  return {v.begin(), v.end()};
}

} // namespace

BOOST_AUTO_TEST_SUITE(bad_input)

BOOST_AUTO_TEST_CASE(each_bad_message_gets_its_error_while_a_job_streams) {
  server srv;
  producer c(*srv.rt);
  c.subscribe("bg");
  BOOST_REQUIRE(c.request({{"op", "submit"}, {"id", "bg"}, {"prompt", "Tell me a story"}, {"max_tokens", 300}, {"ignore_eos", true}})["ok"] == true);
  const int streamed = wait_for_tokens(c, "bg", 0);  // it is streaming
  std::vector<int> long_prompt(1100, 1000);  // over the server's max_model_len of 1024
  const std::string valid = msgpack_of({{"op", "health"}});
  struct bad_case { std::string name, frame, code, field; };
  const std::vector<bad_case> cases = {
      {"not msgpack", bytes_of({0xc1}), "bad_request", ""},
      {"huge array-length claim", bytes_of({0xdd, 0xff, 0xff, 0xff, 0xff}), "bad_request", ""},
      {"trailing bytes", valid + bytes_of({0x01}), "bad_request", ""},
      {"wrong type", msgpack_of({{"op", "submit"}, {"id", "x1"}, {"prompt", "hi"}, {"max_tokens", "ten"}}), "bad_request", "max_tokens"},
      {"unknown op", msgpack_of({{"op", "explode"}}), "bad_request", "op"},
      {"missing id", msgpack_of({{"op", "submit"}, {"prompt", "hi"}}), "bad_request", "id"},
      {"invalid id", msgpack_of({{"op", "submit"}, {"id", "no spaces!"}, {"prompt", "hi"}}), "bad_request", "id"},
      {"empty prompt", msgpack_of({{"op", "submit"}, {"id", "x2"}, {"prompt", ""}}), "bad_request", "prompt"},
      {"prompt over max_model_len", msgpack_of({{"op", "submit"}, {"id", "x3"}, {"prompt_tokens", long_prompt}}), "too_long", ""},
      {"max_tokens <= 0", msgpack_of({{"op", "submit"}, {"id", "x4"}, {"prompt", "hi"}, {"max_tokens", 0}}), "bad_request", "max_tokens"},
      {"unknown job", msgpack_of({{"op", "status"}, {"id", "nobody"}}), "not_found", ""},
      {"duplicate id", msgpack_of({{"op", "submit"}, {"id", "bg"}, {"prompt", "hi"}}), "duplicate", ""},
  };
  for (const auto& bc : cases) {
    BOOST_TEST_CONTEXT(bc.name) {
      const json r = c.request_raw(bc.frame);
      BOOST_TEST(r["ok"] == false);
      BOOST_TEST(r["error"]["code"] == bc.code);
      BOOST_TEST(!r["error"]["message"].get<std::string>().empty());
      if (!bc.field.empty()) BOOST_TEST(r["error"].value("field", "") == bc.field);
    }
  }
  const json before = c.request({{"op", "status"}, {"id", "bg"}});
  BOOST_TEST(before["state"] == "running");
  BOOST_TEST(wait_for_tokens(c, "bg", before["completion_tokens"].get<int>()) > before["completion_tokens"].get<int>());  // still streaming
  BOOST_TEST(c.request({{"op", "health"}})["status"] == "serving");
  c.request({{"op", "cancel"}, {"id", "bg"}});
  const auto events = c.collect("bg");
  check_stream(events);
  BOOST_TEST(events.back()["usage"]["completion_tokens"].get<int>() > streamed);
}

BOOST_AUTO_TEST_CASE(queue_bound_answers_overloaded_and_accepted_jobs_finish) {
  server srv("cpu", [](serve::runtime_options& o) {
    o.sched.max_num_seqs = 1;
    o.sched.max_num_queued_reqs = 2;
  });
  producer c(*srv.rt);
  std::vector<std::string> accepted;
  int overloaded = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string id = "q" + std::to_string(i);
    c.subscribe(id);
    const json r = c.request({{"op", "submit"}, {"id", id}, {"prompt", "Once upon a time"}, {"max_tokens", 8}, {"ignore_eos", true}});
    if (r["ok"] == true) accepted.push_back(id);
    else if (r["error"]["code"] == "overloaded") ++overloaded;
  }
  BOOST_TEST(overloaded > 0);
  BOOST_TEST(accepted.size() >= 3u);
  for (const auto& id : accepted) {
    const auto events = c.collect(id);
    check_stream(events);
    BOOST_TEST(events.back()["finish_reason"] == "length");
  }
}

BOOST_AUTO_TEST_CASE(drain_finishes_or_cancels_every_job_and_refuses_new_ones) {
  server srv;
  producer c(*srv.rt);
  for (const char* id : {"short", "endless"}) c.subscribe(id);
  BOOST_REQUIRE(c.request({{"op", "submit"}, {"id", "short"}, {"prompt", "Hi"}, {"max_tokens", 4}})["ok"] == true);
  BOOST_REQUIRE(c.request({{"op", "submit"}, {"id", "endless"}, {"prompt", "Hi"}, {"max_tokens", 1000}, {"ignore_eos", true}})["ok"] == true);
  // The producer side runs on its own thread; shutdown() runs on the thread that built the
  // runtime (CAF 0.17's actor system must be destroyed there, see runtime.hpp).
  json late;
  std::vector<json> ended_short, ended_long;
  std::thread producer_side([&] {
    for (int i = 0; i < 2400 && c.request({{"op", "health"}})["status"] != "draining"; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    late = c.request({{"op", "submit"}, {"id", "late"}, {"prompt", "Hi"}});
    ended_short = c.collect("short", std::chrono::seconds(10));
    ended_long = c.collect("endless", std::chrono::seconds(10));
  });
  BOOST_TEST(srv.rt->shutdown(1.0) == 0);
  producer_side.join();
  BOOST_TEST(late["error"]["code"] == "shutting_down");
  BOOST_REQUIRE(!ended_short.empty());
  BOOST_REQUIRE(!ended_long.empty());
  BOOST_TEST(ended_short.back()["kind"] == "done");
  BOOST_TEST(ended_long.back()["kind"] == "done");
  BOOST_TEST(ended_long.back()["finish_reason"] == "cancelled");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
