// The event-driven HTTP server (transport/http_server.cpp) on its own, with a trivial handler:
// many more waiting requests than I/O threads are all held at once and answered; a client that
// stalls in its headers or its body is dropped at its deadline while other requests are served;
// a body far over the limit is refused unread (issue 26, defect 5).
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/http_server.hpp"

namespace conveyor::testing {
namespace {

using namespace std::chrono_literals;

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void send_all(int fd, const std::string& s) { BOOST_REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size())); }

// Everything until the server closes (or the 20 s receive timeout).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"; }

// A server whose /wait requests are answered only once `release` is called (from another
// thread, as a job's end would be); /now is answered at once.
struct fixture {
  transport::http_server server;
  std::mutex mu;
  std::vector<std::shared_ptr<transport::http_exchange>> waiting;
  explicit fixture(transport::http_server_config cfg) : server(cfg) {
    server.start({}, [this](transport::http_request req, std::shared_ptr<transport::http_exchange> x) {
      if (req.path == "/wait") {
        std::lock_guard lk(mu);
        waiting.push_back(std::move(x));
        return;
      }
      x->respond(200, "text/plain", "now");
    });
  }
  size_t held() {
    std::lock_guard lk(mu);
    return waiting.size();
  }
  void release() {
    std::lock_guard lk(mu);
    for (auto& x : waiting) x->respond(200, "text/plain", "released");
    waiting.clear();
  }
  ~fixture() { server.stop(1000ms); }
};

transport::http_server_config small(std::chrono::seconds header = 10s, std::chrono::seconds body = 30s) {
  transport::http_server_config c;
  c.io_threads = 2;
  c.max_body_bytes = 1024;
  c.header_timeout = header;
  c.body_timeout = body;
  return c;
}

} // namespace

BOOST_AUTO_TEST_SUITE(http_server)

BOOST_AUTO_TEST_CASE(waiting_requests_hold_no_thread) {
  fixture f(small());
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) {  // 150 times the I/O threads
    fds.push_back(connect_to(f.server.port()));
    send_all(fds.back(), get("/wait"));
  }
  for (int i = 0; i < 2000 && f.held() < 300; ++i) std::this_thread::sleep_for(5ms);
  BOOST_TEST(f.held() == 300u, "every waiting request must be held at once");
  const int probe = connect_to(f.server.port());  // and the server still answers
  send_all(probe, get("/now"));
  BOOST_TEST(read_all(probe).find("200 OK") != std::string::npos);
  ::close(probe);
  f.release();
  for (int fd : fds) {
    BOOST_TEST(read_all(fd).find("released") != std::string::npos);
    ::close(fd);
  }
}

BOOST_AUTO_TEST_CASE(stalled_headers_and_bodies_are_dropped_at_their_deadline) {
  fixture f(small(1s, 1s));
  const int headers = connect_to(f.server.port());
  send_all(headers, "POST /wait HTTP/1.1\r\nHost: x\r\n");  // headers never finished
  const int body = connect_to(f.server.port());
  send_all(body, "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");  // one byte of 100
  const auto t0 = std::chrono::steady_clock::now();
  const int probe = connect_to(f.server.port());
  send_all(probe, get("/now"));
  BOOST_TEST(read_all(probe).find("now") != std::string::npos, "the stalled clients must not hold up others");
  ::close(probe);
  BOOST_TEST(read_all(headers).empty(), "a client that never finishes its headers is closed without an answer");
  BOOST_TEST(read_all(body).empty());
  const bool in_time = std::chrono::steady_clock::now() - t0 < 10s;
  BOOST_TEST(in_time, "dropped at the deadline (1 s), not the receive timeout");
  BOOST_TEST(f.held() == 0u, "a request whose body never came must not reach the handler");
  ::close(headers);
  ::close(body);
}

BOOST_AUTO_TEST_CASE(a_body_far_over_the_limit_is_refused_unread) {
  fixture f(small());
  const int fd = connect_to(f.server.port());
  send_all(fd, "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
  const std::string reply = read_all(fd);
  BOOST_TEST(reply.find("400 Bad Request") != std::string::npos, reply);
  BOOST_TEST(reply.find("too_long") != std::string::npos, reply);
  ::close(fd);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace conveyor::testing
