// CURVE end to end: a runtime with runtime_options::curve set (null executor), and producers
// with their own DEALER, PUSH and SUB. With an authorized key a producer submits (ROUTER and
// PULL) and receives its events; with an unknown key or none it gets no reply and no event.
// Also `conveyor keygen`: the files it writes, their modes, and its refusal to overwrite.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq_addon.hpp>

#include "server_fixture.hpp"
#include "transport/curve.hpp"

namespace conveyor::testing {
namespace {

using transport::curve_keypair;

// A producer whose sockets are CURVE clients of `server_key` with `keys` (nullptr: plaintext).
struct curve_producer {
  curve_producer(const serve::runtime& rt, const std::string& server_key, const curve_keypair* keys)
      : dealer(ctx, zmq::socket_type::dealer), push(ctx, zmq::socket_type::push), sub(ctx, zmq::socket_type::sub) {
    for (auto* s : {&dealer, &push, &sub}) {
      s->set(zmq::sockopt::linger, 0);
      if (keys) {
        s->set(zmq::sockopt::curve_serverkey, server_key);
        s->set(zmq::sockopt::curve_publickey, keys->public_key);
        s->set(zmq::sockopt::curve_secretkey, keys->secret_key);
      }
    }
    dealer.set(zmq::sockopt::rcvtimeo, 1500);
    // A refused CURVE handshake closes the connection; until the DEALER reconnects it has no
    // peer, and a blocking send would wait for one forever.
    dealer.set(zmq::sockopt::sndtimeo, 1500);
    sub.set(zmq::sockopt::rcvtimeo, 200);
    sub.set(zmq::sockopt::subscribe, "");  // everything: heartbeats and every job
    dealer.connect(rt.router_endpoint());
    push.connect(rt.pull_endpoint());
    sub.connect(rt.pub_endpoint());
  }

  // The reply to `msg`, or nullopt when none came within the timeout.
  std::optional<json> request(const json& msg) {
    const auto bytes = json::to_msgpack(msg);
    if (!dealer.send(zmq::buffer(bytes), zmq::send_flags::none)) return std::nullopt;
    zmq::message_t reply;
    if (!dealer.recv(reply)) return std::nullopt;
    return json::from_msgpack(std::string(static_cast<const char*>(reply.data()), reply.size()));
  }

  void send_push(const json& msg) {
    const auto bytes = json::to_msgpack(msg);
    push.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  }

  // Every event received within `wait` (heartbeats included), by topic prefix.
  std::vector<std::pair<std::string, json>> drain(std::chrono::milliseconds wait) {
    std::vector<std::pair<std::string, json>> out;
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(sub, std::back_inserter(parts)) || parts.size() != 2) continue;
      out.emplace_back(parts[0].to_string(), json::from_msgpack(parts[1].to_string()));
    }
    return out;
  }

  zmq::context_t ctx;
  zmq::socket_t dealer, push, sub;
};

size_t count_job_events(const std::vector<std::pair<std::string, json>>& evs, const std::string& id) {
  size_t n = 0;
  for (const auto& [topic, ev] : evs) n += topic == "job/" + id + "/";
  return n;
}

json submit(const std::string& id) {
  return {{"op", "submit"}, {"id", id}, {"prompt", "hello"}, {"max_tokens", 3}};
}

} // namespace

BOOST_AUTO_TEST_SUITE(curve_serve)

BOOST_AUTO_TEST_CASE(only_an_authorized_producer_submits_and_subscribes) {
  const curve_keypair server_keys = transport::generate_curve_keypair(), alice = transport::generate_curve_keypair(),
                      mallory = transport::generate_curve_keypair();
  server s("null", [&](serve::runtime_options& ro) {
    ro.curve.secret_key = server_keys.secret_key;
    ro.curve.public_key = server_keys.public_key;
    ro.curve.authorized = {alice.public_key};
  });
  curve_producer ok(*s.rt, server_keys.public_key, &alice);
  curve_producer stranger(*s.rt, server_keys.public_key, &mallory);
  curve_producer plain(*s.rt, "", nullptr);
  curve_producer wrong_server(*s.rt, alice.public_key, &alice);  // trusts the wrong server key

  // Refused producers: no reply on the ROUTER, and their PUSHed jobs never exist.
  for (auto* p : {&stranger, &plain, &wrong_server}) {
    BOOST_TEST(!p->request({{"op", "health"}}).has_value());
    p->send_push(submit("pushed-by-refused"));
  }
  // The authorized producer: a reply, its ROUTER job's events and its PULL job's events.
  auto health = ok.request({{"op", "health"}});
  BOOST_REQUIRE(health.has_value());
  BOOST_TEST((*health)["status"] == "serving");
  ok.drain(std::chrono::milliseconds(300));  // let the subscription settle (heartbeats every 50 ms)
  auto reply = ok.request(submit("curve-ok"));
  BOOST_REQUIRE(reply.has_value());
  BOOST_TEST((*reply)["ok"] == true, reply->dump());
  ok.send_push(submit("curve-pushed"));
  const auto seen = ok.drain(std::chrono::milliseconds(1500));
  BOOST_TEST(count_job_events(seen, "curve-ok") >= 2u);  // accepted ... done
  BOOST_TEST(count_job_events(seen, "curve-pushed") >= 2u);

  // Nothing at all reached the refused subscribers: no job events, no heartbeat.
  for (auto* p : {&stranger, &plain, &wrong_server}) BOOST_TEST(p->drain(std::chrono::milliseconds(300)).empty());
  auto st = ok.request({{"op", "status"}, {"id", "pushed-by-refused"}});
  BOOST_REQUIRE(st.has_value());
  BOOST_TEST((*st)["ok"] == false, st->dump());  // unknown job: the PUSH never got in
}

BOOST_AUTO_TEST_CASE(keygen_writes_a_loadable_pair_and_never_overwrites) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("conveyor-keygen-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string cmd = std::string(CONVEYOR_BINARY_DIR) + "/conveyor keygen --out-dir " + dir.string() + " --name srv";
  const std::string out = (dir.string() + ".out");
  int status = std::system((cmd + " >" + out + " 2>&1").c_str());
  BOOST_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto mode = static_cast<unsigned>(fs::status(dir / "srv.key").permissions() & fs::perms::all);
  BOOST_TEST(mode == 0600u);
  std::ifstream pub_in(dir / "srv.pub");
  std::string pub;
  std::getline(pub_in, pub);
  const auto cfg = transport::load_curve_server_config((dir / "srv.key").string(), (dir / "srv.pub").string());
  BOOST_TEST(cfg.public_key == pub);
  BOOST_TEST(cfg.authorized == std::vector<std::string>{pub});

  status = std::system((cmd + " >" + out + " 2>&1").c_str());
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 2));
  std::ifstream log(out);
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  BOOST_TEST(text.find("refusing to overwrite") != std::string::npos, text);
  std::ifstream again(dir / "srv.pub");
  std::string pub2;
  std::getline(again, pub2);
  BOOST_TEST(pub2 == pub);  // untouched
  fs::remove_all(dir);
  fs::remove(out);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
