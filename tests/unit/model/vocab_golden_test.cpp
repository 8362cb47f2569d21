// The tokenizer on llama.cpp's own vocabulary files (models/ggml-vocab-{qwen2,llama-spm,llama-bpe}.gguf
// of the llama.cpp source scripts/fetch_llama_src.sh unpacks: Qwen2, SentencePiece as in Llama 2 and
// Mistral 7B, Llama 3) against tests/data/vocab_goldens.json (scripts/make_vocab_goldens.py: ids from
// llama-tokenize, text from llama_detokenize). Every case must give llama.cpp's ids exactly, with
// and without BOS, and decode()/piece() its text; end-of-generation ids must match too. Also: the
// SentencePiece pieces (▁ as space, byte tokens) drive an XGrammar constraint byte for byte.
// The source directory: $CONVEYOR_LLAMA_SRC, else ${CONVEYOR_CACHE:-~/.cache/conveyor}/llama.cpp-<v>/src
// as scripts/fetch_llama_src.sh lays it out. A missing vocabulary file fails with a HINT, never skips.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/constraint.hpp"
#include "model/formats/gguf.hpp"
#include "model/text/grammar.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/unicode_bytes.hpp"

namespace fs = std::filesystem;
using namespace conveyor::model;
using conveyor::token_id;
using nlohmann::json;

namespace {

const json& goldens() {
  static const json doc = [] {
    std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/vocab_goldens.json");
    BOOST_REQUIRE_MESSAGE(in.good(), "tests/data/vocab_goldens.json is missing. HINT: run scripts/make_vocab_goldens.py");
    return json::parse(in);
  }();
  return doc;
}

fs::path llama_src() {
  if (const char* dir = std::getenv("CONVEYOR_LLAMA_SRC"); dir != nullptr && *dir != '\0') return dir;
  const char* cache = std::getenv("CONVEYOR_CACHE");
  const char* home = std::getenv("HOME");
  const fs::path root = cache != nullptr && *cache != '\0' ? fs::path(cache)
                                                          : fs::path(home != nullptr ? home : "/root") / ".cache/conveyor";
  return root / ("llama.cpp-" + goldens().at("llama_cpp_python").get<std::string>()) / "src";
}

const json& golden_of(const std::string& file) {
  for (const json& v : goldens().at("vocabs")) {
    if (v.at("file") == file) return v;
  }
  BOOST_FAIL("no '" << file << "' in tests/data/vocab_goldens.json. HINT: run scripts/make_vocab_goldens.py");
  throw std::logic_error("unreachable");
}

tokenizer load(const json& g) {
  const fs::path path = llama_src() / "models" / g.at("file").get<std::string>();
  BOOST_REQUIRE_MESSAGE(fs::exists(path), path.string() << " is missing. HINT: run scripts/fetch_llama_src.sh "
                                                           "(setup.sh does), or set CONVEYOR_LLAMA_SRC");
  BOOST_REQUIRE_MESSAGE(fs::file_size(path) == g.at("bytes").get<uintmax_t>(),
                        path.string() << " is not the file the goldens were made from. HINT: re-run "
                                         "scripts/fetch_llama_src.sh, then scripts/make_vocab_goldens.py");
  return tokenizer::from_gguf(gguf_file::open(path.string()));
}

std::string show(const std::vector<token_id>& ids) {
  std::string s;
  for (token_id id : ids) s += std::to_string(id) + " ";
  return s;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += char(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

/// Every golden case of one vocabulary: ids, decode, pieces, stream; then the metadata.
void check_vocab(const std::string& file) {
  const json& g = golden_of(file);
  const tokenizer t = load(g);
  BOOST_TEST(t.vocab_size() == g.at("n_tokens").get<int32_t>());
  BOOST_TEST(t.bos() == g.at("bos").get<token_id>());
  BOOST_TEST(t.eos() == g.at("eos").get<token_id>());
  BOOST_TEST(t.eog_ids() == g.at("eog").get<std::vector<token_id>>(), "eog " << show(t.eog_ids()));

  size_t equal_ids = 0, equal_text = 0;
  const json& cases = g.at("cases");
  BOOST_REQUIRE_GE(cases.size(), 100u);
  for (const json& c : cases) {
    const auto text = c.at("text").get<std::string>();
    const bool special = c.at("parse_special").get<bool>();
    const auto want = c.at("ids").get<std::vector<token_id>>();
    const auto want_bos = c.at("ids_special").get<std::vector<token_id>>();
    BOOST_TEST_CONTEXT(file << " text '" << text << "' parse_special " << special) {
      const auto got = t.encode(text, special, false);
      BOOST_TEST(got == want, "ids " << show(got) << "\n want " << show(want));
      const auto got_bos = t.encode(text, special, true);
      BOOST_TEST(got_bos == want_bos, "ids with BOS " << show(got_bos) << "\n want " << show(want_bos));
      equal_ids += got == want && got_bos == want_bos;

      const std::string dec = t.decode(want);
      BOOST_TEST(dec == c.at("detokenized").get<std::string>());
      BOOST_TEST(t.decode(want, true) == c.at("detokenized_special").get<std::string>());
      equal_text += dec == c.at("detokenized").get<std::string>();
      const auto& pieces = c.at("pieces");
      BOOST_REQUIRE_EQUAL(pieces.size(), want.size());
      std::string joined, streamed;
      stream_decoder sd(t);
      for (size_t i = 0; i < want.size(); ++i) {
        const std::string p = unhex(pieces[i].get<std::string>());
        BOOST_TEST(t.piece(want[i]) == p, "piece of " << want[i]);
        joined += p;
        streamed += sd.push(want[i]);
      }
      streamed += sd.flush();
      BOOST_TEST(streamed == joined);  // the stream is llama.cpp's pieces, as its server sends them
    }
  }
  BOOST_TEST_MESSAGE(file << ": " << equal_ids << "/" << cases.size() << " ids equal, " << equal_text << "/"
                          << cases.size() << " detokenizations equal (" << goldens().at("reference").get<std::string>()
                          << ")");
}

} // namespace

BOOST_AUTO_TEST_SUITE(vocab_golden)

BOOST_AUTO_TEST_CASE(qwen2_matches_llama_cpp) { check_vocab("ggml-vocab-qwen2.gguf"); }

BOOST_AUTO_TEST_CASE(sentencepiece_llama_matches_llama_cpp) { check_vocab("ggml-vocab-llama-spm.gguf"); }

BOOST_AUTO_TEST_CASE(llama3_bpe_matches_llama_cpp) { check_vocab("ggml-vocab-llama-bpe.gguf"); }

BOOST_AUTO_TEST_CASE(sentencepiece_metadata_and_round_trip) {
  const tokenizer t = load(golden_of("ggml-vocab-llama-spm.gguf"));
  BOOST_TEST((t.kind(0) == token_kind::unknown));
  BOOST_TEST((t.kind(3) == token_kind::byte));
  BOOST_TEST(t.piece(3 + 0x0A) == "\n");      // <0x0A>
  BOOST_TEST(t.piece(29871) == " ");          // ▁
  BOOST_TEST(t.piece(1) == "");               // <s>: control, hidden
  BOOST_TEST(t.piece(1, true) == "<s>");
  // add_bos defaults to true; the space prefix comes back off in decode. (A literal ▁ in the text
  // would come back as a space, in llama.cpp too.)
  for (const std::string text : {"Hello world", " two  spaces ", "中文 🚀 déjà\n\tx", "x  \n y"}) {
    const auto ids = t.encode(text, false, true);
    BOOST_TEST(ids.front() == 1);
    BOOST_TEST(t.decode(std::vector<token_id>(ids.begin() + 1, ids.end())) == text);
  }
}

// A 4k-token prompt round-trips; the time is reported, not asserted (speed belongs to benchmarks).
BOOST_AUTO_TEST_CASE(sentencepiece_long_prompt_round_trips) {
  const json& g = golden_of("ggml-vocab-llama-spm.gguf");
  const tokenizer t = load(g);
  std::string unit;
  for (const json& c : g.at("cases")) {
    if (!c.at("parse_special").get<bool>()) unit += c.at("text").get<std::string>() + "\n";
  }
  std::string text = unit;
  while (t.encode(text, false, false).size() < 4096) text += unit;
  double best_ms = 1e9;
  size_t n = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = t.encode(text, false, false);
    n = ids.size();
    // SentencePiece cannot tell a typed U+2581 from a space: both decode as a space (llama.cpp too).
    BOOST_TEST(t.decode(ids) == spm_unescape_spaces(text));
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  BOOST_TEST_MESSAGE("SentencePiece encode: " << n << " tokens from " << text.size() << " bytes in " << best_ms << " ms");
}

BOOST_AUTO_TEST_CASE(sentencepiece_pieces_drive_grammars) {
  // XGrammar sees each token's bytes (tokenizer::piece): ▁ as a space, <0xXX> as its byte.
  const tokenizer t = load(golden_of("ggml-vocab-llama-spm.gguf"));
  const std::string text = "x = 42; // d\xC3\xA9j\xC3\xA0 \xE2\x82\xAC\xF0\x9F\xA6\x99\n";
  const auto ids = t.encode(text, false, false);
  bool byte_token = false;
  std::string regex;  // the pieces' bytes, regex metacharacters escaped
  for (token_id id : ids) {
    byte_token |= t.kind(id) == token_kind::byte;
    for (char c : t.piece(id)) {
      if (c == '\n') regex += "\\n";
      else if (std::string_view(".^$|?*+()[]{}\\/").find(c) != std::string_view::npos) regex += std::string("\\") + c;
      else regex += c;
    }
  }
  BOOST_REQUIRE(byte_token);  // the emoji has no token of its own: byte fallback
  const grammar_compiler gc(t, t.vocab_size());
  const auto c = gc.constrain(grammar_kind::regex, regex);
  std::vector<uint32_t> mask;
  auto allowed = [&](token_id id) { return (mask[size_t(id) / 32] >> (id % 32) & 1u) != 0; };
  for (token_id id : ids) {
    c->fill_mask(mask);
    BOOST_TEST(allowed(id), "token " << id << " '" << t.piece(id) << "'");
    BOOST_TEST(c->accept(id));
  }
  c->fill_mask(mask);
  BOOST_TEST(allowed(t.eos()));
  BOOST_TEST(!allowed(ids.front()));
}

BOOST_AUTO_TEST_CASE(qwen2_stops_on_im_end_and_endoftext) {
  const tokenizer t = load(golden_of("ggml-vocab-qwen2.gguf"));
  BOOST_TEST(t.is_eog(151643));  // <|endoftext|>
  BOOST_TEST(t.is_eog(151645));  // <|im_end|>
  BOOST_TEST(!t.is_eog(151644)); // <|im_start|>
  // "</s>" is a normal token in this vocabulary; llama.cpp makes it control and end-of-generation.
  BOOST_TEST((t.kind(128247) == token_kind::control));
  BOOST_TEST(t.encode("</s>", true, false) == (std::vector<token_id>{128247}));
}

BOOST_AUTO_TEST_SUITE_END()
