// summarize_reply() reads what the encoders write (ok and error replies), and a dead letter
// carries the request bytes unchanged.
#include <boost/test/unit_test.hpp>

#include <msgpack.hpp>

#include "schemas/replies.hpp"
#include "schemas/stored.hpp"

using namespace conveyor::schemas;

BOOST_AUTO_TEST_SUITE(reply_summary)

BOOST_AUTO_TEST_CASE(ok_and_error_replies_are_read_back) {
  auto ok = summarize_reply(encode(submit_reply{"j1"}));
  BOOST_REQUIRE(ok.has_value());
  BOOST_TEST(ok->ok);
  auto err = summarize_reply(encode(error_reply{"j1", error_code::overloaded, "queue full", {}}));
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(!err->ok);
  BOOST_TEST(err->code == "overloaded");
  BOOST_TEST(err->message == "queue full");
  const wire_bytes junk{0xc1, 0x00};
  BOOST_TEST(!summarize_reply(junk).has_value());
}

BOOST_AUTO_TEST_CASE(a_dead_letter_keeps_the_request) {
  const wire_bytes request{0x81, 0xa2, 'i', 'd', 0xa1, 'x'};
  const wire_bytes dead = encode_dead_letter("x", error_code::internal, "delivered 5 times", 5, request);
  msgpack::object_handle h = msgpack::unpack(reinterpret_cast<const char*>(dead.data()), dead.size());
  std::map<std::string, msgpack::object> m;
  h.get().convert(m);
  BOOST_TEST(m.at("id").as<std::string>() == "x");
  BOOST_TEST(m.at("deliveries").as<uint64_t>() == 5u);
  const auto& bin = m.at("request");
  BOOST_REQUIRE(bin.type == msgpack::type::BIN);
  BOOST_TEST(wire_bytes(bin.via.bin.ptr, bin.via.bin.ptr + bin.via.bin.size) == request);
  std::map<std::string, std::string> e;
  m.at("error").convert(e);
  BOOST_TEST(e.at("code") == "internal");
  BOOST_TEST(e.at("message") == "delivered 5 times");
}

BOOST_AUTO_TEST_SUITE_END()
