// CURVE at the transport level: a zap_authenticator and a CURVE ROUTER in one context, DEALER
// clients on loopback. Only a client whose public key is authorized gets through; an unknown key,
// a plaintext client and a client holding the wrong server key deliver nothing. Key files: every
// malformed one is a curve_error naming the file and the fix.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <zmq_addon.hpp>

#include "transport/curve.hpp"
#include "transport/sockets.hpp"

namespace conveyor::testing {
namespace {

using namespace conveyor::transport;

struct curve_router {
  curve_router() {
    cfg.secret_key = server.secret_key;
    cfg.public_key = server.public_key;
    cfg.authorized = {client.public_key};
    zap = std::make_unique<zap_authenticator>(ctx, cfg.authorized);
    router = bind_socket(ctx, zmq::socket_type::router, "tcp://127.0.0.1:*", "--router", cfg);
    endpoint = bound_endpoint(router);
  }
  ~curve_router() {
    router.close();
    zap.reset();  // before the context terminates
  }

  // A DEALER that says `hello`; `keys` empty: plaintext. Returns "" or what the ROUTER echoed back.
  std::string round_trip(const curve_keypair* keys, const std::string& server_key, const std::string& hello) {
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    d.set(zmq::sockopt::rcvtimeo, 700);
    d.set(zmq::sockopt::sndtimeo, 700);
    if (keys) {
      d.set(zmq::sockopt::curve_serverkey, server_key);
      d.set(zmq::sockopt::curve_publickey, keys->public_key);
      d.set(zmq::sockopt::curve_secretkey, keys->secret_key);
    }
    d.connect(endpoint);
    d.send(zmq::buffer(hello), zmq::send_flags::none);
    router.set(zmq::sockopt::rcvtimeo, 700);
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(router, std::back_inserter(parts)) || parts.size() != 2) return "";
    zmq::send_multipart(router, parts);  // echo [identity, body]
    zmq::message_t reply;
    return d.recv(reply) ? reply.to_string() : "";
  }

  zmq::context_t ctx;
  curve_keypair server = generate_curve_keypair(), client = generate_curve_keypair();
  curve_server_config cfg;
  std::unique_ptr<zap_authenticator> zap;
  zmq::socket_t router;
  std::string endpoint;
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("conveyor-curve-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string p = temp_path(name);
  std::ofstream(p) << text;
  return p;
}

// load_curve_server_config(secret, authorized) must throw a one-line curve_error holding `needle`.
void expect_curve_error(const std::string& secret, const std::string& authorized, const std::string& needle) {
  BOOST_TEST_CONTEXT("secret " << secret << ", authorized " << authorized) {
    try {
      load_curve_server_config(secret, authorized);
      BOOST_ERROR("no curve_error");
    } catch (const curve_error& e) {
      const std::string what = e.what();
      BOOST_TEST(what.find(needle) != std::string::npos, "expected '" << needle << "' in: " << what);
      BOOST_TEST(what.find('\n') == std::string::npos);
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(curve)

BOOST_AUTO_TEST_CASE(only_an_authorized_client_key_gets_through) {
  curve_router r;
  BOOST_TEST(r.round_trip(&r.client, r.server.public_key, "authorized") == "authorized");
  BOOST_TEST(r.zap->num_refused() == 0u);

  const curve_keypair stranger = generate_curve_keypair();
  BOOST_TEST(r.round_trip(&stranger, r.server.public_key, "unknown key") == "");
  BOOST_TEST(r.zap->num_refused() >= 1u);

  BOOST_TEST(r.round_trip(nullptr, "", "plaintext") == "");
  const curve_keypair impostor = generate_curve_keypair();  // the client trusts the wrong server
  BOOST_TEST(r.round_trip(&r.client, impostor.public_key, "wrong server key") == "");

  // The refused clients did not spoil the socket: the authorized one still gets through.
  BOOST_TEST(r.round_trip(&r.client, r.server.public_key, "again") == "again");
}

BOOST_AUTO_TEST_CASE(without_curve_the_same_router_is_plain_tcp) {
  zmq::context_t ctx;
  zmq::socket_t router = bind_socket(ctx, zmq::socket_type::router, "tcp://127.0.0.1:*", "--router");
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  d.connect(bound_endpoint(router));
  d.send(zmq::str_buffer("plain"), zmq::send_flags::none);
  router.set(zmq::sockopt::rcvtimeo, 2000);
  std::vector<zmq::message_t> parts;
  BOOST_REQUIRE(zmq::recv_multipart(router, std::back_inserter(parts)));
  BOOST_TEST(parts.back().to_string() == "plain");
}

BOOST_AUTO_TEST_CASE(key_files_load_and_every_bad_one_is_named_with_its_fix) {
  const curve_keypair server = generate_curve_keypair(), a = generate_curve_keypair(), b = generate_curve_keypair();
  const std::string key = write_file("server.key", "# comment\npublic-key = " + server.public_key + "\nsecret-key = " + server.secret_key + "\n");
  const std::string pub = write_file("server.pub", server.public_key + "\n");
  const std::string auth = write_file("authorized", "# producers\n\n" + a.public_key + "  # alice\n" + b.public_key + "\n");
  const curve_server_config c = load_curve_server_config(key, auth);
  BOOST_TEST(c.enabled());
  BOOST_TEST(c.public_key == server.public_key);
  BOOST_TEST(c.secret_key == server.secret_key);
  BOOST_TEST((c.authorized == std::vector<std::string>{a.public_key, b.public_key}));

  expect_curve_error(temp_path("missing.key"), auth, "missing.key");
  expect_curve_error(temp_path("missing.key"), auth, "conveyor keygen");
  expect_curve_error(key, temp_path("missing-authorized"), "missing-authorized");
  expect_curve_error(pub, auth, "is a public key file");
  expect_curve_error(key, key, "is a secret key file");
  expect_curve_error(key, write_file("empty-authorized", "# nobody yet\n\n"), "contains no keys");
  expect_curve_error(key, write_file("short-authorized", a.public_key.substr(0, 39) + "\n"), "short-authorized:1: not a 40-character Z85");
  expect_curve_error(key, write_file("not-z85", std::string(40, '"') + "\n"), "not a 40-character Z85");
  expect_curve_error(write_file("short.key", "secret-key = abc\n"), auth, "not 40 characters of Z85");
  expect_curve_error(write_file("nokey.key", "hello\n"), auth, "no `secret-key = <z85>` line");
  expect_curve_error(write_file("mismatch.key", "public-key = " + a.public_key + "\nsecret-key = " + server.secret_key + "\n"), auth,
                     "does not match");
  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = write_file("locked.key", "secret-key = " + server.secret_key + "\n");
    std::filesystem::permissions(locked, std::filesystem::perms::none);
    expect_curve_error(locked, auth, "Permission denied");
  }
  for (const char* n : {"server.key", "server.pub", "authorized", "empty-authorized", "short-authorized", "not-z85", "short.key",
                        "nokey.key", "mismatch.key", "locked.key"})
    std::filesystem::remove(temp_path(n));
}

BOOST_AUTO_TEST_CASE(loopback_endpoints_are_recognized) {
  for (const char* ep : {"tcp://127.0.0.1:5555", "tcp://127.1.2.3:1", "tcp://localhost:5555", "tcp://[::1]:5555", "ipc:///tmp/x", "inproc://a"})
    BOOST_TEST(is_loopback_endpoint(ep), ep);
  for (const char* ep : {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.0.0.7:5555", "tcp://[::]:5555", "tcp://eth0:5555"})
    BOOST_TEST(!is_loopback_endpoint(ep), ep);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
