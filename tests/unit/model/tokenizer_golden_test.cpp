// The tokenizer on the real SmolLM2-135M-Instruct vocabulary against llama.cpp: every golden case
// of tests/data/smollm2_tokenize.json (scripts/make_tokenizer_goldens.py) must give llama.cpp's ids
// exactly, and decode() llama.cpp's detokenization. Also streams, metadata and encode speed.
// A missing model file is a failure with a HINT, not a skip.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "model/formats/gguf.hpp"
#include "model/model_path.hpp"
#include "model/text/chat_template.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/unicode_bytes.hpp"  // is_valid_utf8

namespace fs = std::filesystem;
using namespace conveyor::model;
using conveyor::token_id;
using nlohmann::json;

namespace {

const tokenizer& smollm2() {
  static std::unique_ptr<tokenizer> tok;
  if (!tok) {
    const fs::path path = fs::path(models_dir()) / "SmolLM2-135M-Instruct.Q4_1.gguf";
    BOOST_REQUIRE_MESSAGE(fs::exists(path), path.string() << " is missing. HINT: run ./setup.sh (fetches the model)");
    tok = std::make_unique<tokenizer>(tokenizer::from_gguf(gguf_file::open(path.string())));
  }
  return *tok;
}

const json& goldens() {
  static const json doc = [] {
    std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/smollm2_tokenize.json");
    BOOST_REQUIRE_MESSAGE(in.good(), "tests/data/smollm2_tokenize.json is missing. HINT: run "
                                     "scripts/make_tokenizer_goldens.py");
    return json::parse(in);
  }();
  return doc;
}

std::string show(const std::vector<token_id>& ids) {
  std::string s;
  for (token_id id : ids) s += std::to_string(id) + " ";
  return s;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_golden)

BOOST_AUTO_TEST_CASE(metadata_of_smollm2) {
  const tokenizer& t = smollm2();
  BOOST_TEST(t.vocab_size() == 49152);
  BOOST_TEST(t.bos() == 1);
  BOOST_TEST(t.eos() == 2);
  // llama.cpp's EOG: <|endoftext|>, <|im_end|> and the FIM repo token <reponame>.
  BOOST_TEST(t.eog_ids() == (std::vector<token_id>{0, 2, 4}));
  BOOST_TEST(t.is_eog(2));
  BOOST_TEST(!t.is_eog(1));
  BOOST_TEST((t.kind(16) == token_kind::control));
  BOOST_TEST((t.kind(17) == token_kind::normal));
  BOOST_TEST(t.chat_template() == goldens().at("chat_template").get<std::string>());
  // add_bos_token is false: add_special=true adds nothing.
  BOOST_TEST(t.encode("Hi", false, true) == t.encode("Hi", false, false));
}

BOOST_AUTO_TEST_CASE(every_case_matches_llama_cpp) {
  const tokenizer& t = smollm2();
  const json& cases = goldens().at("cases");
  BOOST_REQUIRE_GE(cases.size(), 60u);
  size_t equal_ids = 0, equal_text = 0;
  for (const json& c : cases) {
    const auto text = c.at("text").get<std::string>();
    const bool special = c.at("parse_special").get<bool>();
    const auto want = c.at("ids").get<std::vector<token_id>>();
    BOOST_TEST_CONTEXT("text '" << text << "' parse_special " << special) {
      const auto got = t.encode(text, special, false);
      BOOST_TEST(got == want, "ids " << show(got) << "\n want " << show(want));
      equal_ids += got == want;
      const std::string dec = t.decode(want);
      BOOST_TEST(dec == c.at("detokenized").get<std::string>());
      BOOST_TEST(t.decode(want, true) == c.at("detokenized_special").get<std::string>());
      equal_text += dec == c.at("detokenized").get<std::string>();
    }
  }
  BOOST_TEST_MESSAGE("tokenizer goldens: " << equal_ids << "/" << cases.size() << " ids equal, " << equal_text
                                           << "/" << cases.size() << " detokenizations equal ("
                                           << goldens().at("reference").get<std::string>() << ")");
}

BOOST_AUTO_TEST_CASE(chat_prompts_render_and_tokenize_like_llama_cpp) {
  const tokenizer& t = smollm2();
  const chat_template tpl = chat_template::for_model(t);
  for (const json& c : goldens().at("chat")) {
    std::vector<chat_message> msgs;
    for (const json& m : c.at("messages")) msgs.push_back({m.at("role"), m.at("content")});
    const std::string rendered = tpl.render(msgs, c.at("add_generation_prompt").get<bool>());
    BOOST_TEST_CONTEXT("chat " << c.at("messages").dump()) {
      BOOST_TEST(rendered == c.at("rendered").get<std::string>());
      BOOST_TEST(t.encode(rendered, true, false) == c.at("ids").get<std::vector<token_id>>());
    }
  }
}

BOOST_AUTO_TEST_CASE(stream_never_splits_a_character) {
  const tokenizer& t = smollm2();
  const std::string text = "🚀中文👨‍👩‍👧 déjà 한국어 🇫🇷!";
  const std::vector<token_id> ids = t.encode(text, false, false);
  // At least one character must span several tokens, or this test proves nothing.
  bool split = false;
  for (token_id id : ids) split |= !is_valid_utf8(t.piece(id));
  BOOST_REQUIRE(split);

  stream_decoder sd(t);
  std::string all;
  for (token_id id : ids) {
    const std::string delta = sd.push(id);
    BOOST_TEST(is_valid_utf8(delta), "delta after id " << id);
    all += delta;
  }
  all += sd.flush();
  BOOST_TEST(all == text);
  BOOST_TEST(all == t.decode(ids));
}

BOOST_AUTO_TEST_CASE(stream_of_single_byte_tokens) {
  const tokenizer& t = smollm2();
  const std::string text = "a€🚀中b";
  // One token per byte: the normal token whose piece is exactly that byte.
  std::vector<token_id> raw_ids;
  for (unsigned char c : text) {
    for (token_id id = 0; id < t.vocab_size(); ++id) {
      if (t.kind(id) == token_kind::normal && t.piece(id) == std::string(1, char(c))) {
        raw_ids.push_back(id);
        break;
      }
    }
  }
  BOOST_REQUIRE_EQUAL(raw_ids.size(), text.size());
  stream_decoder sd(t);
  std::vector<std::string> deltas;
  for (token_id id : raw_ids) deltas.push_back(sd.push(id));
  BOOST_TEST(sd.flush().empty());
  const std::vector<std::string> want{"a", "", "", "€", "", "", "", "🚀", "", "", "中", "b"};
  BOOST_TEST(deltas == want, boost::test_tools::per_element());
}

// A 4k-token prompt round-trips; the time is reported, not asserted (speed belongs to benchmarks).
BOOST_AUTO_TEST_CASE(long_prompt_round_trips) {
  const tokenizer& t = smollm2();
  std::string text;
  for (const json& c : goldens().at("cases")) {
    if (!c.at("parse_special").get<bool>()) text += c.at("text").get<std::string>() + "\n";
  }
  const std::string unit = text;
  while (t.encode(text, false, false).size() < 4096) text += unit;
  double best_ms = 1e9;
  size_t n = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = t.encode(text, false, false);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best_ms = std::min(best_ms, ms);
    n = ids.size();
    BOOST_TEST(t.decode(ids) == text);
  }
  BOOST_TEST_MESSAGE("encode: " << n << " tokens from " << text.size() << " bytes in " << best_ms << " ms ("
                                << n / best_ms * 1000.0 << " tokens/s)");
}

BOOST_AUTO_TEST_SUITE_END()
