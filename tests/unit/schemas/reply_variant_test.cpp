// The typed reply (what intakes get) encodes as its alternative does, and a dead letter carries
// the request bytes unchanged.
#include <boost/test/unit_test.hpp>

#include <msgpack.hpp>

#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "schemas/stored.hpp"

using namespace conveyor::schemas;

BOOST_AUTO_TEST_SUITE(reply_variant)

BOOST_AUTO_TEST_CASE(the_reply_variant_encodes_as_its_alternative) {
  const submit_reply ok{"j1"};
  const error_reply err{"j1", error_code::overloaded, "queue full", {}};
  const status_reply st{"j1", job_state::running, 4, 2, 3, std::nullopt};
  const fetch_reply f{"j1", {encode(accepted_event{"j1", 0})}, false};
  BOOST_TEST(encode(reply(ok)) == encode(ok));
  BOOST_TEST(encode(reply(err)) == encode(err));
  BOOST_TEST(encode(reply(st)) == encode(st));
  BOOST_TEST(encode(reply(f)) == encode(f));
  BOOST_TEST(encode(reply(cancel_reply{"j1", job_state::cancelled})) == encode(cancel_reply{"j1", job_state::cancelled}));
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
