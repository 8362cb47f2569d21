// CURVE keys, key files and the ZAP handler (RFC 27) that admits only authorized client keys.
//
// Key files, as `conveyor keygen` writes them:
//   NAME.key (mode 0600)   public-key = <40 chars of Z85>
//                          secret-key = <40 chars of Z85>
//   NAME.pub               <40 chars of Z85>            (the public key alone, one line)
// An authorized-keys file holds one client public key per line (the contents of a .pub file);
// blank lines, lines starting with '#', and anything after a key following whitespace are ignored.
#include "transport/curve.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <zmq_addon.hpp>

namespace conveyor::transport {
namespace {

constexpr size_t z85_key_len = 40;
constexpr const char* zap_endpoint = "inproc://zeromq.zap.01";

bool is_z85_key(const std::string& s) {
  if (s.size() != z85_key_len) return false;
  uint8_t bin[32];
  return zmq_z85_decode(bin, s.c_str()) != nullptr;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> read_lines(const std::string& file, const std::string& fix) {
  std::ifstream in(file);
  if (!in) {
    int err = errno;
    throw curve_error("cannot read " + file + ": " + std::strerror(err ? err : ENOENT) + "; " + fix);
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(trim(line));
  if (in.bad()) throw curve_error("cannot read " + file + ": read error; " + fix);
  return lines;
}

// "name = value" → value when the line's name is `name`, else "".
std::string field(const std::string& line, const std::string& name) {
  if (line.rfind(name, 0) != 0) return "";
  std::string rest = trim(line.substr(name.size()));
  if (rest.empty() || rest[0] != '=') return "";
  return trim(rest.substr(1));
}

std::string derive_public(const std::string& secret) {
  char pub[z85_key_len + 1];
  if (zmq_curve_public(pub, secret.c_str()) != 0)
    throw curve_error(std::string("cannot derive a CURVE public key: ") + zmq_strerror(zmq_errno()) +
                      "; is libzmq built with CURVE (libsodium)?");
  return pub;
}

std::string load_secret(const std::string& file) {
  const std::string fix = "pass the NAME.key file written by `conveyor keygen --name NAME`";
  auto lines = read_lines(file, fix);
  std::string secret, pub;
  for (const auto& l : lines) {
    if (auto v = field(l, "secret-key"); !v.empty()) secret = v;
    if (auto v = field(l, "public-key"); !v.empty()) pub = v;
  }
  if (secret.empty()) {
    bool looks_public = !lines.empty() && is_z85_key(lines[0].substr(0, lines[0].find_first_of(" \t")));
    throw curve_error(file + (looks_public ? " is a public key file, not a secret one; " : " has no `secret-key = <z85>` line; ") + fix);
  }
  if (!is_z85_key(secret))
    throw curve_error(file + ": secret-key is not 40 characters of Z85; regenerate it with `conveyor keygen`");
  if (!pub.empty() && pub != derive_public(secret))
    throw curve_error(file + ": public-key does not match secret-key; regenerate the pair with `conveyor keygen`");
  return secret;
}

std::vector<std::string> load_authorized(const std::string& file) {
  const std::string fix = "list client public keys (the contents of NAME.pub from `conveyor keygen`), one per line";
  std::vector<std::string> keys;
  int n = 0;
  for (const auto& l : read_lines(file, fix)) {
    ++n;
    if (l.empty()) continue;
    std::string key = l.substr(0, l.find_first_of(" \t"));
    if (is_z85_key(key)) {  // first: a key may start with '#' or contain '='
      keys.push_back(key);
      continue;
    }
    if (!field(l, "secret-key").empty() || !field(l, "public-key").empty())
      throw curve_error(file + " is a secret key file (.key), not an authorized-keys file; " + fix);
    if (l[0] == '#') continue;  // a comment
    throw curve_error(file + ":" + std::to_string(n) + ": not a 40-character Z85 public key; " + fix);
  }
  if (keys.empty()) throw curve_error(file + " contains no keys, so no client could connect; " + fix);
  return keys;
}

} // namespace

curve_keypair generate_curve_keypair() {
  char pub[z85_key_len + 1], sec[z85_key_len + 1];
  if (zmq_curve_keypair(pub, sec) != 0)
    throw curve_error(std::string("cannot generate a CURVE key pair: ") + zmq_strerror(zmq_errno()) +
                      "; is libzmq built with CURVE (libsodium)?");
  return {pub, sec};
}

curve_server_config load_curve_server_config(const std::string& secret_key_file, const std::string& authorized_keys_file) {
  curve_server_config c;
  c.secret_key = load_secret(secret_key_file);
  c.public_key = derive_public(c.secret_key);
  c.authorized = load_authorized(authorized_keys_file);
  return c;
}

void apply_curve_server(zmq::socket_t& s, const curve_server_config& c) {
  if (!c.enabled()) return;
  s.set(zmq::sockopt::curve_server, true);
  s.set(zmq::sockopt::curve_secretkey, c.secret_key);
  s.set(zmq::sockopt::zap_domain, "conveyor");
}

struct zap_authenticator::impl {
  explicit impl(zmq::context_t& ctx) : rep(ctx, zmq::socket_type::rep) {}
  zmq::socket_t rep;
  std::set<std::string> authorized;  // 32-byte binary keys
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> refused{0};
  std::thread thread;

  void run() {
    zmq::pollitem_t item{rep.handle(), 0, ZMQ_POLLIN, 0};
    while (!stop.load()) {
      try {
        if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) > 0) answer();
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        return;  // ETERM: the context is shutting down, nothing left to answer
      }
    }
  }

  // Request: version, request id, domain, address, identity, mechanism, credentials...
  // Reply:   version, request id, status code, status text, user id, metadata.
  void answer() {
    std::vector<zmq::message_t> req;
    if (!zmq::recv_multipart(rep, std::back_inserter(req))) return;
    std::string version = req.size() > 0 ? req[0].to_string() : "";
    std::string mechanism = req.size() > 5 ? req[5].to_string() : "";
    bool ok = version == "1.0" && mechanism == "CURVE" && req.size() > 6 && authorized.count(req[6].to_string()) > 0;
    if (!ok) refused.fetch_add(1);
    std::array<zmq::const_buffer, 6> reply{zmq::str_buffer("1.0"),
                                           req.size() > 1 ? zmq::buffer(req[1].data(), req[1].size()) : zmq::str_buffer(""),
                                           ok ? zmq::str_buffer("200") : zmq::str_buffer("400"),
                                           ok ? zmq::str_buffer("OK") : zmq::str_buffer("client key not authorized"),
                                           zmq::str_buffer(""),
                                           zmq::str_buffer("")};
    zmq::send_multipart(rep, reply);
  }
};

zap_authenticator::zap_authenticator(zmq::context_t& ctx, std::vector<std::string> authorized)
    : p_(std::make_unique<impl>(ctx)) {
  for (const auto& k : authorized) {
    if (!is_z85_key(k)) throw curve_error("authorized key '" + k + "' is not 40 characters of Z85; use the contents of a .pub file from `conveyor keygen`");
    std::string bin(32, '\0');
    zmq_z85_decode(reinterpret_cast<uint8_t*>(bin.data()), k.c_str());
    p_->authorized.insert(bin);
  }
  p_->rep.set(zmq::sockopt::linger, 0);
  // Bound here, not in the thread: a CURVE handshake that finds no handler is let through.
  try {
    p_->rep.bind(zap_endpoint);
  } catch (const zmq::error_t& e) {
    throw curve_error(std::string("cannot bind the ZAP handler on ") + zap_endpoint + ": " + e.what() +
                      "; only one zap_authenticator may exist per ZeroMQ context");
  }
  p_->thread = std::thread([p = p_.get()] { p->run(); });
}

zap_authenticator::~zap_authenticator() {
  p_->stop.store(true);
  if (p_->thread.joinable()) p_->thread.join();
}

uint64_t zap_authenticator::num_refused() const { return p_->refused.load(); }

bool is_loopback_endpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string host = endpoint.substr(6);
  if (host.rfind("[::1]", 0) == 0) return true;
  host = host.substr(0, host.rfind(':'));
  return host == "localhost" || host == "lo" || host.rfind("127.", 0) == 0;
}

} // namespace conveyor::transport
