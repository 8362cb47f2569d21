// tool_chat (model/text/tool_chat.*): each family's template renders the tools and the call
// history, the family's own call syntax (as its template writes a call) parses back into the call,
// streamed deltas add up to the whole answer, `required` grammars compile with XGrammar against a
// real vocabulary, and the generic JSON format serves templates without tools.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "model/formats/gguf.hpp"
#include "model/text/grammar.hpp"
#include "model/text/tokenizer.hpp"
#include "model/text/tool_chat.hpp"
#include "model_files.hpp"

using namespace conveyor;
using namespace conveyor::model;
using json = nlohmann::json;
using req = schemas::tool_chat_request;

namespace {

std::string template_file(const std::string& name) {
  const std::string path = std::string(CONVEYOR_JINJA_TEMPLATES) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in.good(), path << " missing. HINT: run scripts/build_jinja.sh (it installs llama.cpp's templates)");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string weather_tools = R"([{"type":"function","function":{"name":"get_weather","description":"Weather in a city",
  "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
  {"type":"function","function":{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}}}])";

req ask(req::choice c = req::choice::automatic) {
  req r;
  r.messages = R"([{"role":"user","content":"Weather in Paris?"}])";
  r.tools = weather_tools;
  r.tool_choice = c;
  return r;
}

tool_chat family(const std::string& file, const std::string& bos, const std::string& eos) {
  return tool_chat(template_file(file), chat_template::special_tokens{bos, eos, false, false});
}

// The whole answer from feeding `text` in pieces of `step` bytes; checks the deltas add up to it.
schemas::chat_turn run(const tool_chat_plan& p, const std::string& text, size_t step) {
  auto parser = p.parser();
  std::string content, reasoning;
  std::vector<schemas::tool_call> calls;
  auto take = [&](const std::vector<schemas::chat_turn_delta>& ds) {
    for (const auto& d : ds) {
      content += d.content;
      reasoning += d.reasoning;
      if (d.tool_index < 0) continue;
      if (size_t(d.tool_index) >= calls.size()) calls.resize(size_t(d.tool_index) + 1);
      auto& c = calls[size_t(d.tool_index)];
      BOOST_TEST(d.call.id.empty() == !c.id.empty());  // the id (and name) once, with the call's first part
      if (!d.call.id.empty()) c.id = d.call.id;
      c.name += d.call.name;
      c.arguments += d.call.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += step) take(parser->feed(text.substr(i, step)));
  take(parser->finish());
  const schemas::chat_turn& t = parser->turn();
  BOOST_TEST(content == t.content);
  BOOST_TEST(reasoning == t.reasoning);
  BOOST_REQUIRE_EQUAL(calls.size(), t.tool_calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    BOOST_TEST(calls[i].id == t.tool_calls[i].id);
    BOOST_TEST(calls[i].name == t.tool_calls[i].name);
    BOOST_TEST(json::parse(calls[i].arguments) == json::parse(t.tool_calls[i].arguments));
  }
  return t;
}

void expect_weather_call(const schemas::chat_turn& t) {
  BOOST_REQUIRE_EQUAL(t.tool_calls.size(), 1u);
  BOOST_TEST(t.tool_calls[0].name == "get_weather");
  BOOST_TEST(json::parse(t.tool_calls[0].arguments) == json::parse(R"({"city":"Paris"})"));
  BOOST_TEST(!t.tool_calls[0].id.empty());
}

struct family_case {
  const char* file;
  const char* bos;
  const char* eos;
  const char* call;  // a call to get_weather(city=Paris) as the family writes it
};

const family_case families[] = {
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
    {"Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|begin_of_text|>", "<|im_end|>",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1b2c3d4e\"}]"},
};

} // namespace

BOOST_AUTO_TEST_SUITE(tool_chat_suite)

BOOST_AUTO_TEST_CASE(each_family_renders_the_tools_and_parses_its_own_call_syntax_whole_and_streamed) {
  for (const auto& f : families) {
    BOOST_TEST_CONTEXT(f.file) {
      const tool_chat t = family(f.file, f.bos, f.eos);
      BOOST_TEST(t.native());
      const tool_chat_plan p = t.plan(ask());
      BOOST_TEST(p.prompt.find("get_weather") != std::string::npos);  // the template described the tools
      BOOST_TEST(p.grammar.empty());                                  // auto is parsed, not constrained
      for (size_t step : {size_t(1), size_t(3), size_t(1000)}) expect_weather_call(run(p, f.call, step));
      const auto plain = run(p, "It is sunny.", 2);  // no call: all content
      BOOST_TEST(plain.tool_calls.empty());
      BOOST_TEST(plain.content == "It is sunny.");
    }
  }
}

namespace {

// "%d %b %Y" and "%b %d %Y" of `t` in local time: the two date forms the templates print.
std::pair<std::string, std::string> date_forms(std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char a[32], b[32];
  std::strftime(a, sizeof a, "%d %b %Y", &tm);
  std::strftime(b, sizeof b, "%b %d %Y", &tm);
  return {a, b};
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

} // namespace

// llama-server's /apply-template with the same tools and history (scripts/make_template_goldens.py):
// byte for byte, but for the date. llama.cpp's chat layer prints today's date from the system clock
// (Llama 3.x's "Today Date"), so the golden's date (that of its now_unix) is read as today's: a
// render that straddles midnight is done again.
BOOST_AUTO_TEST_CASE(tools_and_call_history_render_as_llama_server_renders_them) {
  std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/chat_template_goldens.json");
  BOOST_REQUIRE_MESSAGE(in.good(), "tests/data/chat_template_goldens.json missing. HINT: run scripts/make_template_goldens.py");
  const auto g = nlohmann::ordered_json::parse(in);  // (the tools' keys in the order llama-server saw them)
  setenv("TZ", "UTC", 1);  // the Llama 3.x prompts print the date they were rendered on, in UTC
  tzset();
  const chat_template::special_tokens tokens{g.at("bos_token"), g.at("eos_token"), g.at("add_bos"), g.at("add_eos")};
  int compared = 0;
  for (const auto& c : g.at("cases")) {
    if (!c.contains("tool_set")) continue;
    BOOST_TEST_CONTEXT(c.at("template").get<std::string>() << " / " << c.at("tool_set").get<std::string>()) {
      const tool_chat t(template_file(c.at("template").get<std::string>()), tokens);
      const auto& body = c.at("body");
      req r;
      r.messages = body.at("messages").dump();
      r.tools = body.at("tools").dump();
      r.tool_choice = body.value("tool_choice", "auto") == "required" ? req::choice::required : req::choice::automatic;
      r.parallel_tool_calls = body.value("parallel_tool_calls", true);
      BOOST_REQUIRE(c.contains("prompt"));
      const auto [golden_dmy, golden_mdy] = date_forms(g.at("now_unix").get<std::time_t>());
      std::string prompt;
      std::pair<std::string, std::string> today;
      for (bool same_day = false; !same_day;) {
        today = date_forms(std::time(nullptr));
        prompt = t.plan(r).prompt;
        same_day = date_forms(std::time(nullptr)) == today;
      }
      const std::string expected =
          replace_all(replace_all(c.at("prompt").get<std::string>(), golden_dmy, today.first), golden_mdy, today.second);
      BOOST_TEST(prompt == expected);
      ++compared;
    }
  }
  BOOST_TEST(compared >= 15);
}

// Round trip: the text a family's template writes for an assistant's call (the history rendered
// without and with that turn) parses back into that call.
BOOST_AUTO_TEST_CASE(each_family_parses_the_call_its_own_template_writes) {
  for (const auto& f : families) {
    BOOST_TEST_CONTEXT(f.file) {
      const tool_chat t = family(f.file, f.bos, f.eos);
      req before = ask();
      req with = ask();
      with.messages = R"([{"role":"user","content":"Weather in Paris?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call00001","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]}])";
      with.add_generation_prompt = false;
      const std::string opened = t.plan(before).prompt, whole = t.plan(with).prompt;
      BOOST_REQUIRE_MESSAGE(whole.starts_with(opened), "the turn does not extend the prompt:\n" << opened << "\n---\n" << whole);
      std::string written = whole.substr(opened.size());
      if (auto end = written.rfind(f.eos); end != std::string::npos) written.resize(end);
      BOOST_TEST_MESSAGE(f.file << " writes a call as: " << written);
      expect_weather_call(run(t.plan(before), written, 3));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_call_history_renders_with_ids_and_results) {
  req r = ask();
  r.messages = R"([{"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call00001","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
    {"role":"tool","tool_call_id":"call00001","content":"18 C and sunny"}])";
  for (const auto& f : families) {
    BOOST_TEST_CONTEXT(f.file) {
      const std::string prompt = family(f.file, f.bos, f.eos).plan(r).prompt;
      BOOST_TEST(prompt.find("18 C and sunny") != std::string::npos);
      BOOST_TEST(prompt.find("Paris") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(required_and_named_choices_get_a_grammar_xgrammar_compiles_for_a_real_vocabulary) {
  const tokenizer tok = tokenizer::from_gguf(gguf_file::open(testing::smollm2_path()));
  const grammar_compiler gc(tok, tok.vocab_size());
  for (const auto& f : families) {
    BOOST_TEST_CONTEXT(f.file) {
      const tool_chat t = family(f.file, f.bos, f.eos);
      req named = ask();
      named.function = "add";
      for (const req& r : {ask(req::choice::required), named}) {
        const tool_chat_plan p = t.plan(r);
        BOOST_REQUIRE(!p.grammar.empty());
        BOOST_TEST(p.grammar.find(r.function.empty() ? "get_weather" : "add") != std::string::npos);
        if (!r.function.empty()) BOOST_TEST(p.grammar.find("get_weather") == std::string::npos);  // only the named one
        const std::string root = p.grammar.substr(p.grammar.find("root ::= "));
        BOOST_TEST(root.substr(0, root.find('\n')).find("until") == std::string::npos, root);  // the call comes first
        if (std::string(f.file).find("Mistral") != std::string::npos)
          BOOST_TEST(p.grammar.find(R"("\"" [a-zA-Z0-9]{9} "\"")") != std::string::npos, p.grammar);  // Mistral's ids
        try {
          (void)gc.constrain(grammar_kind::ebnf, p.grammar);
        } catch (const std::exception& e) {
          BOOST_ERROR("XGrammar refused the grammar: " << e.what() << "\n" << p.grammar);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(any_output_in_any_pieces_parses_without_throwing_and_ends_as_the_whole_text_parses) {
  // A model may write anything: pieces of calls, tags, broken JSON. A parser never throws (it runs
  // on the HTTP thread) and its answer is the whole text's, however the text was cut.
  const std::vector<std::string> bits = {"<tool_call>", "</tool_call>", "{\"name\": \"get_weather\"", ", \"arguments\": {\"city\": \"Pa",
                                         "ris\"}}", "[TOOL_CALLS][", "]", "<think>", "</think>", "hello ", "{", "}", "\n", "\"", "<"};
  std::mt19937 rng(5);
  for (const auto& f : families) {
    BOOST_TEST_CONTEXT(f.file) {
      const tool_chat t = family(f.file, f.bos, f.eos);
      const tool_chat_plan p = t.plan(ask());
      for (int c = 0; c < 60; ++c) {
        std::string text;
        for (int k = std::uniform_int_distribution<int>(1, 12)(rng); k > 0; --k) text += bits[rng() % bits.size()];
        auto whole = p.parser();
        (void)whole->feed(text);
        (void)whole->finish();
        auto pieces = p.parser();
        for (size_t at = 0; at < text.size();) {
          const size_t n = std::uniform_int_distribution<size_t>(1, 6)(rng);
          BOOST_CHECK_NO_THROW((void)pieces->feed(text.substr(at, n)));
          at += n;
        }
        BOOST_CHECK_NO_THROW((void)pieces->finish());
        BOOST_TEST(pieces->turn().content == whole->turn().content, text);
        BOOST_TEST(pieces->turn().tool_calls.size() == whole->turn().tool_calls.size(), text);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(parallel_tool_calls_false_allows_one_call) {
  const std::string two = std::string(families[0].call) + "\n" + families[0].call;
  for (const char* file : {"Qwen-Qwen2.5-7B-Instruct.jinja", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"}) {
    BOOST_TEST_CONTEXT(file) {
      const tool_chat t = family(file, "", "<|im_end|>");
      req r = ask(req::choice::required);
      BOOST_TEST(run(t.plan(r), two, 5).tool_calls.size() == 2u);
      r.parallel_tool_calls = false;
      const tool_chat_plan p = t.plan(r);
      BOOST_TEST(run(p, two, 5).tool_calls.size() == 1u);
      BOOST_TEST(p.grammar.find(")+\n") == std::string::npos, p.grammar);  // the grammar allows one call
    }
  }
}

BOOST_AUTO_TEST_CASE(qwen3_thinking_is_split_from_the_call_when_the_server_parses_reasoning) {
  const tool_chat t = family("Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>");
  req r = ask();
  r.reasoning = true;
  const auto turn = run(t.plan(r), "<think>\nParis, so get_weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
                                      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 4);
  BOOST_TEST(turn.reasoning.find("Paris, so get_weather.") != std::string::npos);
  expect_weather_call(turn);
}

BOOST_AUTO_TEST_CASE(tool_choice_none_renders_no_call_and_parses_none) {
  const tool_chat t = family("Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>");
  const tool_chat_plan p = t.plan(ask(req::choice::none));
  BOOST_TEST(p.grammar.empty());
  const auto turn = run(p, families[0].call, 5);
  BOOST_TEST(turn.tool_calls.empty());
}

BOOST_AUTO_TEST_CASE(a_template_without_tools_gets_the_generic_json_format) {
  const tool_chat t("", chat_template::special_tokens{"", "<|im_end|>", false, false});  // ChatML
  BOOST_TEST(!t.native());
  const tool_chat_plan p = t.plan(ask());
  BOOST_TEST(p.prompt.find("<|im_start|>system\nYou can call these tools") == 0);
  BOOST_TEST(p.prompt.find("\"get_weather\"") != std::string::npos);
  const json schema = json::parse(p.json_schema);
  BOOST_TEST(schema.contains("anyOf"));  // auto: calls or a response
  expect_weather_call(run(p, R"({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})", 7));
  BOOST_TEST(run(p, R"({"response": "Sunny."})", 3).content == "Sunny.");
  BOOST_TEST(run(p, "not json", 3).content == "not json");
  BOOST_TEST(run(p, R"({"response": "Sun\"ny \u00e9t\u00e9\n)", 1).content == "Sun\"ny \u00e9t\u00e9\n");  // cut off: what came
  auto streamed = p.parser();
  BOOST_TEST(streamed->feed(R"({"response": "Hel)").at(0).content == "Hel");  // an answer streams as it comes
  BOOST_TEST(streamed->feed(R"(lo"})").at(0).content == "lo");
  const tool_chat_plan req_plan = t.plan(ask(req::choice::required));
  BOOST_TEST(!json::parse(req_plan.json_schema).contains("anyOf"));
  BOOST_TEST(req_plan.prompt.find("\"response\"") == std::string::npos);
  const tokenizer tok = tokenizer::from_gguf(gguf_file::open(testing::smollm2_path()));
  const grammar_compiler gc(tok, tok.vocab_size());
  BOOST_CHECK_NO_THROW(gc.constrain(grammar_kind::json_schema, p.json_schema));
  BOOST_CHECK_NO_THROW(gc.constrain(grammar_kind::json_schema, req_plan.json_schema));
}

BOOST_AUTO_TEST_CASE(bad_tools_and_messages_are_refused_naming_the_field) {
  const tool_chat t = family("Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>");
  req named = ask();
  named.function = "nope";
  BOOST_CHECK_EXCEPTION(t.plan(named), tool_chat_error, [](const tool_chat_error& e) { return e.field == "tool_choice"; });
  req bad = ask();
  bad.messages = R"([{"role":"assistant"}])";
  BOOST_CHECK_THROW(t.plan(bad), std::exception);
  const tool_chat generic("", chat_template::special_tokens{"", "<|im_end|>", false, false});
  BOOST_CHECK_EXCEPTION(generic.plan(named), tool_chat_error,
                        [](const tool_chat_error& e) { return std::string(e.what()).find("nope") != std::string::npos; });
}

BOOST_AUTO_TEST_CASE(gbnf_empty_alternatives_are_spelled_out_for_xgrammar_and_nothing_else_changes) {
  BOOST_TEST(gbnf_to_xgrammar("space ::= | \" \" | \"\\n\"{1,2}") == "space ::= \"\" | \" \" | \"\\n\"{1,2}");
  BOOST_TEST(gbnf_to_xgrammar("a ::= ( | \"x\" ) b |\nb ::= \"|\" [|(] # ( |\n") == "a ::= ( \"\" | \"x\" ) b |\"\" \nb ::= \"|\" [|(] # ( |\n");
  BOOST_TEST(gbnf_to_xgrammar("r ::= \"a\\\"|\" | [\\]|] x") == "r ::= \"a\\\"|\" | [\\]|] x");  // escapes inside
  BOOST_TEST(gbnf_to_xgrammar("r ::= x\n  | y") == "r ::= x\n  | y");  // a rule continued on the next line
}

BOOST_AUTO_TEST_SUITE_END()
