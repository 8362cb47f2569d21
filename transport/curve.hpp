// CURVE encryption and client authentication for every socket the server binds (ROUTER, PULL,
// PUB). Debian's libzmq is built with libsodium, so CURVE is there; what ZeroMQ leaves to the
// application is the ZAP handler that decides which client keys may connect: without one, every
// client that knows the server's public key gets in. zap_authenticator is that handler.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace conveyor::transport {

/// A key file is missing, unreadable or malformed. what() names the file and the fix.
struct curve_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A CURVE key pair, each key 40 characters of Z85.
struct curve_keypair {
  std::string public_key;
  std::string secret_key;
};

/// A fresh key pair (zmq_curve_keypair).
curve_keypair generate_curve_keypair();

/// The server's CURVE settings. An empty secret_key means CURVE is off (plain TCP).
struct curve_server_config {
  std::string public_key;               // Z85, derived from secret_key
  std::string secret_key;               // Z85
  std::vector<std::string> authorized;  // client public keys (Z85) allowed to connect
  bool enabled() const { return !secret_key.empty(); }
};

/// Reads the server's secret key file (written by `conveyor keygen`) and the authorized-keys
/// file (one Z85 public key per line, '#' comments and blank lines ignored). Throws curve_error.
curve_server_config load_curve_server_config(const std::string& secret_key_file, const std::string& authorized_keys_file);

/// Makes `s` a CURVE server with the ZAP domain "conveyor". Call before bind. No-op when
/// `c` is not enabled.
void apply_curve_server(zmq::socket_t& s, const curve_server_config& c);

/// The ZAP handler (RFC 27): a thread owning a REP socket bound to inproc://zeromq.zap.01 in
/// `ctx`, answering 200 for CURVE clients whose public key is authorized and 400 for every other
/// client (unknown key, NULL or PLAIN mechanism). Construct it before any CURVE socket binds;
/// destroy it (joins the thread) before `ctx` terminates.
class zap_authenticator {
public:
  zap_authenticator(zmq::context_t& ctx, std::vector<std::string> authorized);
  ~zap_authenticator();
  zap_authenticator(const zap_authenticator&) = delete;
  zap_authenticator& operator=(const zap_authenticator&) = delete;
  /// Handshakes refused so far (for logs and tests).
  uint64_t num_refused() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

/// True when `endpoint` listens only on the loopback interface (tcp://127.x, tcp://[::1],
/// tcp://localhost, ipc://, inproc://). serve warns when a non-loopback endpoint runs without CURVE.
bool is_loopback_endpoint(const std::string& endpoint);

} // namespace conveyor::transport
