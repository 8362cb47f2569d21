#include "server_fixture.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <stdexcept>
#include <zmq_addon.hpp>

#include "engine/null_executor.hpp"
#include "model/cpu/cpu_executor.hpp"
#include "model/model_path.hpp"

namespace conveyor::testing {

const smollm2& smollm2::get() {
  static const smollm2 m = [] {
    const std::string p = model::models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!std::filesystem::is_regular_file(p)) throw std::runtime_error("SmolLM2 not found at " + p + "; HINT: run ./setup.sh (fetches the model)");
    smollm2 s;
    s.file = std::make_unique<model::gguf_file>(model::gguf_file::open(p));
    s.tok = std::make_unique<model::tokenizer>(model::tokenizer::from_gguf(*s.file));
    return s;
  }();
  return m;
}

server::server(const std::string& executor, std::function<void(serve::runtime_options&)> tweak) {
  const auto& m = smollm2::get();
  std::shared_ptr<conveyor::executor> ex;
  if (executor == "null") {
    ex = std::make_shared<null_executor>(executor_info{1024, 16, m.tok->vocab_size(), 16384, "null"}, 1000);
  } else {
    model::cpu_executor_options o;
    o.num_kv_blocks = 512;
    ex = std::make_shared<model::cpu_executor>(*m.file, o);
  }
  serve::runtime_options ro;
  ro.router_ep = ro.pub_ep = ro.pull_ep = "tcp://127.0.0.1:*";
  ro.sched.max_model_len = 1024;
  ro.model_name = "smollm2";
  ro.pub.heartbeat_ms = 50;
  if (tweak) tweak(ro);
  rt = std::make_unique<serve::runtime>(ro, std::move(ex), *m.tok);
}

server::~server() { rt->shutdown(5.0); }

namespace {
/// Producers run on worker threads in several tests, and Boost.Test's assertions are not
/// thread-safe (even a passing one writes the shared "last checkpoint": four threads doing so at
/// once crashed streams/sixty_four_jobs_from_four_producers with std::length_error). A failed
/// check throws instead; Boost reports it on the test's thread.
void require(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(what);
}
} // namespace

producer::producer(const serve::runtime& rt)
    : dealer_(ctx_, zmq::socket_type::dealer), sub_(ctx_, zmq::socket_type::sub), push_(ctx_, zmq::socket_type::push) {
  for (auto* s : {&dealer_, &sub_, &push_}) s->set(zmq::sockopt::linger, 0);
  dealer_.set(zmq::sockopt::rcvtimeo, 60000);
  dealer_.connect(rt.router_endpoint());
  push_.connect(rt.pull_endpoint());
  sub_.connect(rt.pub_endpoint());
  sub_.set(zmq::sockopt::subscribe, "sys/");
  // Slow joiner: wait until a heartbeat arrives, so later subscriptions ride a live connection.
  sub_.set(zmq::sockopt::rcvtimeo, 5000);
  std::vector<zmq::message_t> parts;
  require(zmq::recv_multipart(sub_, std::back_inserter(parts)).has_value(), "no heartbeat from the server within 5 s");
  sub_.set(zmq::sockopt::unsubscribe, "sys/");
}

json producer::request_raw(const std::string& bytes) {
  dealer_.send(zmq::buffer(bytes), zmq::send_flags::none);
  zmq::message_t reply;
  require(dealer_.recv(reply).has_value(), "no reply within 60 s");
  return json::from_msgpack(std::string(static_cast<const char*>(reply.data()), reply.size()));
}

json producer::request(const json& msg) {
  const auto bytes = json::to_msgpack(msg);
  return request_raw(std::string(bytes.begin(), bytes.end()));
}

void producer::push(const json& msg) {
  const auto bytes = json::to_msgpack(msg);
  push_.send(zmq::buffer(bytes), zmq::send_flags::none);
}

void producer::subscribe(const std::string& id) {
  sub_.set(zmq::sockopt::subscribe, "job/" + id + "/");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::vector<json> producer::collect(const std::string& id, std::chrono::seconds timeout) {
  std::vector<json> events = std::move(pending_[id]);
  pending_.erase(id);
  auto terminal = [](const json& e) { return e["kind"] == "done" || e["kind"] == "error"; };
  const auto until = std::chrono::steady_clock::now() + timeout;
  sub_.set(zmq::sockopt::rcvtimeo, 200);
  while (std::chrono::steady_clock::now() < until && (events.empty() || !terminal(events.back()))) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(sub_, std::back_inserter(parts)) || parts.size() != 2) continue;
    json ev = json::from_msgpack(std::string(static_cast<const char*>(parts[1].data()), parts[1].size()));
    if (ev["id"] == id) events.push_back(std::move(ev));
    else pending_[ev["id"].get<std::string>()].push_back(std::move(ev));
  }
  bool whole = !events.empty() && terminal(events.back());
  for (size_t i = 0; whole && i < events.size(); ++i) whole = events[i]["seq"].get<size_t>() == i;
  if (whole) return events;
  // Repair whatever the PUB path lost (late subscription, drops) with fetch, as clients do.
  const json f = request({{"op", "fetch"}, {"id", id}, {"from_seq", 0}, {"max_events", 4096}});
  if (f["ok"] == true && f["events"].size() > events.size()) events = f["events"].get<std::vector<json>>();
  return events;
}

std::string check_stream(const std::vector<json>& events) {
  BOOST_REQUIRE(!events.empty());
  std::string text;
  int terminals = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    BOOST_TEST(events[i]["seq"].get<uint64_t>() == i);
    const std::string kind = events[i]["kind"];
    if (kind == "done" || kind == "error") ++terminals;
    if (kind == "tokens") text += events[i]["text"].get<std::string>();
  }
  BOOST_TEST(events.front()["kind"] == "accepted");
  BOOST_TEST(terminals == 1);
  const std::string last = events.back()["kind"];
  BOOST_TEST((last == "done" || last == "error"));
  return text;
}

} // namespace conveyor::testing
