// libFuzzer target over the request decoder and what the intake builds from its result. Each
// input is one inbound frame, decoded with the default limits and with small ones; then the
// replies and events the intake (actors/intake_handler.cpp) would send for that result are
// encoded and read back. Any broken invariant aborts, which libFuzzer records as a crash:
//   - decode_request() never throws; refusals are bad_request, or too_long exactly when the
//     frame is over max_message_bytes; an error's id is empty or valid;
//   - every reply and event is one msgpack map whose strings are all well-formed UTF-8;
//   - an accepted request respects the limits it was decoded under; a submit has a valid id and
//     one non-empty input, its engine parameters validate, and re-encoding it decodes to the same
//     request; smaller limits never accept what the defaults refuse;
//   - the decoder's UTF-8 check agrees with an independent one (fuzz_checks.hpp) on the raw bytes.
#include <cstring>
#include <limits>
#include <span>
#include <variant>

#include "fuzz_checks.hpp"
#include "schemas/decode_fields.hpp"
#include "schemas/events.hpp"
#include "schemas/replies.hpp"
#include "schemas/requests.hpp"
#include "transport/frame_rules.hpp"

namespace {

using namespace conveyor;
using namespace conveyor::schemas;
using fuzz::outgoing;

// Every limit well below the default, so the fuzzer reaches each refusal with short inputs.
decode_limits small_limits() {
  decode_limits l;
  l.max_message_bytes = 256;
  l.max_array_len = 8;
  l.max_map_len = 12;
  l.max_str_bytes = 48;
  l.max_depth = 3;
  l.max_messages = 3;
  l.max_stop_strings = 2;
  l.max_stop_bytes = 6;
  l.max_stop_token_ids = 3;
  l.max_fetch_events = 5;
  return l;
}

// ---- the round trip: a decoded submit, encoded again with every field (floats as float32) ----

using packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// By hand: msgpack-c's pack_float() writes integral floats as integers and converts 2^64 to
// uint64_t (undefined behaviour), and a temperature of 2^64 is a valid one.
void pack_f32(msgpack::sbuffer& buf, float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  char b[5] = {static_cast<char>(0xca), static_cast<char>(bits >> 24), static_cast<char>(bits >> 16),
               static_cast<char>(bits >> 8), static_cast<char>(bits)};
  buf.write(b, sizeof b);
}

void pack_ints(packer& pk, const std::vector<token_id>& ids) {
  pk.pack_array(static_cast<uint32_t>(ids.size()));
  for (token_id t : ids) pk.pack(t);
}

std::vector<uint8_t> encode_submit(const submit_request& r) {
  msgpack::sbuffer buf;
  packer pk(buf);
  pk.pack_map(16 + (r.seed ? 1 : 0) + (r.deadline_ms ? 1 : 0));
  pack_str(pk, "op"); pack_str(pk, "submit");
  pack_str(pk, "id"); pack_str(pk, r.id);
  if (auto* prompt = std::get_if<std::string>(&r.input)) {
    pack_str(pk, "prompt"); pack_str(pk, *prompt);
  } else if (auto* ids = std::get_if<std::vector<token_id>>(&r.input)) {
    pack_str(pk, "prompt_tokens"); pack_ints(pk, *ids);
  } else {
    const auto& messages = std::get<std::vector<chat_message>>(r.input);
    pack_str(pk, "messages");
    pk.pack_array(static_cast<uint32_t>(messages.size()));
    for (const chat_message& m : messages) {
      pk.pack_map(2);
      pack_str(pk, "role"); pack_str(pk, m.role);
      pack_str(pk, "content"); pack_str(pk, m.content);
    }
  }
  pack_str(pk, "max_tokens"); pk.pack(r.max_tokens);
  pack_str(pk, "temperature"); pack_f32(buf, r.temperature);
  pack_str(pk, "top_p"); pack_f32(buf, r.top_p);
  pack_str(pk, "top_k"); pk.pack(r.top_k);
  pack_str(pk, "min_p"); pack_f32(buf, r.min_p);
  if (r.seed) { pack_str(pk, "seed"); pk.pack(*r.seed); }
  pack_str(pk, "stop");
  pk.pack_array(static_cast<uint32_t>(r.stop.size()));
  for (const std::string& s : r.stop) pack_str(pk, s);
  pack_str(pk, "stop_token_ids"); pack_ints(pk, r.stop_token_ids);
  pack_str(pk, "ignore_eos"); pk.pack(r.ignore_eos);
  pack_str(pk, "min_tokens"); pk.pack(r.min_tokens);
  pack_str(pk, "priority"); pk.pack(r.priority);
  if (r.deadline_ms) { pack_str(pk, "deadline_ms"); pk.pack(*r.deadline_ms); }
  pack_str(pk, "logprobs"); pk.pack(r.logprobs);
  pack_str(pk, "stream"); pk.pack(r.stream);
  pack_str(pk, "unknown_keys_are_ignored"); pk.pack_nil();  // 16th key
  const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
  return {p, p + buf.size()};
}

bool same_input(const prompt_input& a, const prompt_input& b) {
  if (a.index() != b.index()) return false;
  if (auto* p = std::get_if<std::string>(&a)) return *p == std::get<std::string>(b);
  if (auto* t = std::get_if<std::vector<token_id>>(&a)) return *t == std::get<std::vector<token_id>>(b);
  const auto& m = std::get<std::vector<chat_message>>(a);
  const auto& n = std::get<std::vector<chat_message>>(b);
  if (m.size() != n.size()) return false;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i].role != n[i].role || m[i].content != n[i].content) return false;
  return true;
}

bool same(const submit_request& a, const submit_request& b) {
  return a.id == b.id && same_input(a.input, b.input) && a.max_tokens == b.max_tokens &&
         a.temperature == b.temperature && a.top_p == b.top_p && a.top_k == b.top_k &&
         a.min_p == b.min_p && a.seed == b.seed && a.stop == b.stop &&
         a.stop_token_ids == b.stop_token_ids && a.ignore_eos == b.ignore_eos &&
         a.min_tokens == b.min_tokens && a.priority == b.priority && a.deadline_ms == b.deadline_ms &&
         a.logprobs == b.logprobs && a.stream == b.stream;
}

// ---- what the intake sends back ----

void check_error_reply(const error_reply& r) {
  outgoing reply(encode(r));
  reply.expect_ok(false);
  reply.expect_str("id", r.id);
  const msgpack::object* err = reply.get("error");
  FUZZ_CHECK(err && err->type == msgpack::type::MAP, "an error reply has no \"error\" map");
  const msgpack::object* code = outgoing::find(*err, "code");
  FUZZ_CHECK(code && code->type == msgpack::type::STR &&
                 error_code_from_string(fuzz::str_of(*code)) == r.code,
             "an error reply's code does not read back");
  const msgpack::object* field = outgoing::find(*err, "field");
  FUZZ_CHECK(r.field.empty() ? !field : field && fuzz::str_of(*field) == r.field,
             "an error reply's field does not read back");
}

void check_error(const decode_error& e, std::span<const uint8_t> frame, const decode_limits& limits) {
  FUZZ_CHECK(e.code == error_code::bad_request || e.code == error_code::too_long,
             std::string("the decoder refused with code ") + to_string(e.code) + ": " + e.message);
  FUZZ_CHECK((e.code == error_code::too_long) == (frame.size() > limits.max_message_bytes),
             "too_long does not match the frame's size: " + e.message);
  FUZZ_CHECK(e.id.empty() || valid_id(e.id), "a refusal carries an invalid id");
  FUZZ_CHECK(!e.message.empty(), "a refusal without a message");
  // ROUTER: the error reply.
  check_error_reply(to_reply(e));
  // PULL: the error event on the job's topic, sent only when the id is known.
  if (!e.id.empty()) {
    outgoing ev(encode(error_event{e.id, 0, e.code, (e.field.empty() ? "" : e.field + ": ") + e.message}));
    ev.expect_str("id", e.id);
    ev.expect_str("kind", "error");
  }
}

// The id-addressed replies the intake may send for a valid id: a result, or not_found.
void check_id_replies(const std::string& id, const wire_bytes& result) {
  FUZZ_CHECK(valid_id(id), "an accepted request has an invalid id");
  outgoing ok(result);
  ok.expect_ok(true);
  ok.expect_str("id", id);
  check_error_reply({id, error_code::not_found, "no job '" + id + "' (never submitted, or forgotten)", {}});
}

void check_submit(const submit_request& r, const decode_limits& limits, bool round_trip) {
  check_id_replies(r.id, encode(submit_reply{r.id}));
  outgoing(encode(submit_reply{r.id})).expect_str("topic", "job/" + r.id + "/");
  outgoing(encode(accepted_event{r.id, 0})).expect_str("kind", "accepted");

  if (auto* prompt = std::get_if<std::string>(&r.input)) {
    FUZZ_CHECK(!prompt->empty() && fuzz::well_formed_utf8(*prompt), "an empty or non-UTF-8 prompt");
  } else if (auto* ids = std::get_if<std::vector<token_id>>(&r.input)) {
    FUZZ_CHECK(!ids->empty() && ids->size() <= limits.max_array_len, "prompt_tokens out of bounds");
    for (token_id t : *ids) FUZZ_CHECK(t >= 0, "a negative prompt token");
  } else {
    const auto& messages = std::get<std::vector<chat_message>>(r.input);
    FUZZ_CHECK(!messages.empty() && messages.size() <= limits.max_messages, "messages out of bounds");
    for (const chat_message& m : messages) {
      FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant", "a bad role");
      FUZZ_CHECK(fuzz::well_formed_utf8(m.content), "non-UTF-8 message content");
    }
  }
  FUZZ_CHECK(r.stop.size() <= limits.max_stop_strings, "too many stop strings");
  for (const std::string& s : r.stop)
    FUZZ_CHECK(!s.empty() && s.size() <= limits.max_stop_bytes && fuzz::well_formed_utf8(s),
               "a stop string out of bounds or not UTF-8");
  FUZZ_CHECK(r.stop_token_ids.size() <= limits.max_stop_token_ids, "too many stop_token_ids");
  for (token_id t : r.stop_token_ids) FUZZ_CHECK(t >= 0, "a negative stop token id");
  FUZZ_CHECK(!r.deadline_ms || *r.deadline_ms > 0, "a deadline_ms <= 0");

  // What the request actor derives from it must be valid for the engine.
  const sampling_params sp = r.to_sampling_params(42);
  FUZZ_CHECK(sp.validate().empty(), "sampling params do not validate: " + sp.validate());
  FUZZ_CHECK(sp.seed == r.seed.value_or(42), "the seed is lost");
  const stop_params st = r.to_stop_params({2});
  FUZZ_CHECK(st.validate().empty(), "stop params do not validate: " + st.validate());

  if (round_trip) {
    decode_limits roomy;  // the re-encoding writes every field, so it may be a little longer
    roomy.max_message_bytes += 4096;
    decode_result again = decode_request(encode_submit(r), roomy);
    auto* back = std::get_if<submit_request>(&again);
    FUZZ_CHECK(back, "a re-encoded submit is refused: " +
                         (std::holds_alternative<decode_error>(again) ? std::get<decode_error>(again).message : ""));
    FUZZ_CHECK(same(r, *back), "a re-encoded submit decodes to a different request");
  }
}

decode_result decode_and_check(std::span<const uint8_t> frame, const decode_limits& limits, bool round_trip) {
  decode_result result;
  try {
    result = decode_request(frame, limits);
  } catch (...) {
    FUZZ_CHECK(false, "decode_request threw");
  }
  FUZZ_CHECK(!result.valueless_by_exception(), "decode_request returned a valueless variant");
  if (auto* e = std::get_if<decode_error>(&result)) {
    check_error(*e, frame, limits);
    return result;
  }
  FUZZ_CHECK(frame.size() <= limits.max_message_bytes, "a frame over max_message_bytes was accepted");
  if (auto* s = std::get_if<submit_request>(&result)) {
    check_submit(*s, limits, round_trip);
  } else if (auto* c = std::get_if<cancel_request>(&result)) {
    check_id_replies(c->id, encode(cancel_reply{c->id, job_state::cancelled}));
  } else if (auto* s = std::get_if<status_request>(&result)) {
    check_id_replies(s->id, encode(status_reply{s->id, job_state::finished, 1, 2, 3, finish_reason::length}));
  } else if (auto* f = std::get_if<fetch_request>(&result)) {
    FUZZ_CHECK(f->max_events >= 1 && f->max_events <= limits.max_fetch_events, "max_events out of bounds");
    // The intake passes from_seq on as an int64_t.
    FUZZ_CHECK(f->from_seq <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "from_seq over 2^63 - 1");
    check_id_replies(f->id, encode(fetch_reply{f->id, {}, false}));
  } else if (std::holds_alternative<stats_request>(result)) {
    outgoing(encode(stats_reply{})).expect_ok(true);
  } else {
    outgoing(encode(health_reply{server_status::serving, "fuzz-model"})).expect_ok(true);
  }
  return result;
}

} // namespace

// The intakes' frame rules (transport/frame_rules.hpp) over the same bytes: one frame decodes
// exactly as decode_request does (a PUSHed refusal always counts as a submit); the input cut into
// two or three frames is always refused with bad_request, by either intake.
void check_frame_rules(std::span<const uint8_t> frame, const decode_result& alone) {
  using transport::intake_kind;
  const std::span<const uint8_t> one[] = {frame};
  for (intake_kind kind : {intake_kind::router, intake_kind::pull}) {
    const decode_result r = transport::decode_message(one, kind, decode_limits{});
    FUZZ_CHECK(r.index() == alone.index(), "one frame decoded differently through the frame rules");
    if (const auto* e = std::get_if<decode_error>(&r); e && kind == intake_kind::pull)
      FUZZ_CHECK(e->submit, "a PUSHed refusal did not count as a submit");
  }
  const size_t cut = frame.size() / 2;
  const std::span<const uint8_t> two[] = {frame.first(cut), frame.subspan(cut)};
  const std::span<const uint8_t> three[] = {frame.first(cut), frame.subspan(cut), frame};
  for (auto frames : {std::span<const std::span<const uint8_t>>(two), std::span<const std::span<const uint8_t>>(three)}) {
    const decode_result r = transport::decode_message(frames, intake_kind::router, decode_limits{});
    const auto* e = std::get_if<decode_error>(&r);
    FUZZ_CHECK(e && e->code == error_code::bad_request, "a multi-frame message was not refused");
    outgoing(encode(to_reply(*e))).expect_ok(false);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::span<const uint8_t> frame(data, size);
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  FUZZ_CHECK(detail::valid_utf8(raw) == fuzz::well_formed_utf8(raw),
             "the decoder's UTF-8 check disagrees with table 3-7");
  const decode_result roomy = decode_and_check(frame, decode_limits{}, true);
  const decode_result tight = decode_and_check(frame, small_limits(), false);
  // Every small limit is below its default, so the small ones never accept more.
  if (!std::holds_alternative<decode_error>(tight))
    FUZZ_CHECK(roomy.index() == tight.index(), "small limits accepted what the defaults refused");
  check_frame_rules(frame, roomy);
  return 0;
}
