// chat_template against llama.cpp's llama-server: every case of tests/data/chat_template_goldens.json
// (scripts/make_template_goldens.py: Qwen2.5, Qwen3, Llama 3.1, Llama 3.2, Mistral Nemo and SmolLM2
// templates, rendered by llama-server's /apply-template) must come out byte for byte, and a case
// llama.cpp refused must be refused with the template's message. Also: raise_exception, malformed
// templates, the ChatML default, BOS handling, developer roles, and concurrent renders.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "model/text/chat_template.hpp"

using namespace conveyor::model;
using json = nlohmann::json;
using msgs = std::vector<chat_message>;

namespace {

const json& goldens() {
  static const json doc = [] {
    std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/chat_template_goldens.json");
    BOOST_REQUIRE_MESSAGE(in.good(), "tests/data/chat_template_goldens.json missing. HINT: run scripts/make_template_goldens.py");
    return json::parse(in);
  }();
  return doc;
}

std::string read_template(const json& t) {
  if (t.at("file").is_null()) return t.at("source").get<std::string>();
  const std::string path = std::string(CONVEYOR_JINJA_TEMPLATES) + "/" + t.at("file").get<std::string>();
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in.good(), path << " missing. HINT: run scripts/build_jinja.sh (it installs llama.cpp's templates)");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

msgs messages_of(const json& c) {
  msgs m;
  for (const json& x : c.at("messages")) m.push_back({x.at("role"), x.at("content")});
  return m;
}

// llama.cpp reports a raise_exception as "... Error: Jinja Exception: <the template's message>".
std::string raised_message(const std::string& llama_error) {
  const std::string tag = "Jinja Exception: ";
  const auto at = llama_error.rfind(tag);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "not a raise_exception: " << llama_error);
  return llama_error.substr(at + tag.size());
}

std::string error_of(const chat_template& t, const msgs& m, bool add_generation_prompt = true) {
  try {
    (void)t.render(m, add_generation_prompt, 0);
  } catch (const chat_template_error& e) {
    return e.what();
  }
  return "(no error)";
}

const chat_template::special_tokens smol_tokens{"<|im_start|>", "<|im_end|>", false, false};

} // namespace

BOOST_AUTO_TEST_SUITE(chat_template_suite)

BOOST_AUTO_TEST_CASE(renders_like_llama_server) {
  const json& g = goldens();
  BOOST_REQUIRE_MESSAGE(g.at("llama_src_version").get<std::string>() == CONVEYOR_LLAMA_JINJA_VERSION,
                        "goldens from llama.cpp " << g.at("llama_src_version") << ", engine and templates installed from "
                        << CONVEYOR_LLAMA_JINJA_VERSION << ". HINT: run scripts/build_jinja.sh or scripts/make_template_goldens.py");
  // The goldens' Llama 3.x prompts print the date llama-server rendered them on, in UTC.
  setenv("TZ", "UTC", 1);
  tzset();
  const chat_template::special_tokens tokens{g.at("bos_token"), g.at("eos_token"), g.at("add_bos"), g.at("add_eos")};
  const std::time_t now = g.at("now_unix").get<std::time_t>();
  int matched = 0, refused = 0, tool_cases = 0;
  for (const json& t : g.at("templates")) {
    const chat_template tpl(read_template(t), tokens);
    for (const json& c : g.at("cases")) {
      if (c.at("template") != t.at("name")) continue;
      if (c.contains("tool_set")) {  // tool calling's: tests/unit/model/tool_chat_test.cpp
        ++tool_cases;
        continue;
      }
      const bool agp = c.at("add_generation_prompt").get<bool>();
      BOOST_TEST_CONTEXT(t.at("name").get<std::string>() << " / " << c.at("messages_name").get<std::string>()
                                                         << " / add_generation_prompt=" << agp) {
        if (c.contains("prompt")) {
          const std::string got = tpl.render(messages_of(c), agp, now);
          BOOST_TEST(got == c.at("prompt").get<std::string>());
          matched += got == c.at("prompt").get<std::string>();
        } else {
          const std::string want = "chat template: " + raised_message(c.at("error").get<std::string>());
          BOOST_TEST(error_of(tpl, messages_of(c), agp) == want);
          ++refused;
        }
      }
    }
  }
  BOOST_TEST(matched + refused + tool_cases == static_cast<int>(g.at("cases").size()));
  BOOST_TEST(refused >= 1);  // Mistral refuses non-alternating roles
  BOOST_TEST_MESSAGE("chat templates: " << matched << " prompts equal to llama-server's, " << refused << " refusals");
}

BOOST_AUTO_TEST_CASE(raise_exception_is_an_error_with_the_templates_message) {
  const chat_template t("{% for m in messages %}{% if loop.index0 > 0 and m['role'] == messages[loop.index0 - 1]['role'] %}"
                        "{{ raise_exception('Conversation roles must alternate') }}{% endif %}{{ m['content'] }}{% endfor %}",
                        smol_tokens);
  BOOST_TEST(t.render(msgs{{"user", "a"}, {"assistant", "b"}}, false, 0) == "ab");
  BOOST_TEST(error_of(t, msgs{{"user", "a"}, {"user", "b"}}) == "chat template: Conversation roles must alternate");
}

// chat_template_kwargs: the request's variables override what render() sets (Qwen3's
// enable_thinking, as llama-server and vLLM pass it) and add new ones.
BOOST_AUTO_TEST_CASE(template_kwargs_override_and_add_variables) {
  const chat_template t("{% for m in messages %}{{ m['content'] }}{% endfor %}"
                        "{% if add_generation_prompt %}<a>{% if enable_thinking is defined and enable_thinking is false %}"
                        "<think></think>{% endif %}{% endif %}{{ persona | default('-') }}{{ depth | default('') }}",
                        smol_tokens);
  const msgs m{{"user", "hi"}};
  BOOST_TEST(t.render(m, true, 0) == "hi<a>-");
  const template_kwargs off{{"enable_thinking", false}, {"persona", std::string("terse")}, {"depth", int64_t{3}}};
  BOOST_TEST(t.render(m, true, 0, off) == "hi<a><think></think>terse3");
  BOOST_TEST(t.render(m, true, 0, {{"enable_thinking", true}}) == "hi<a>-");
}

// As llama.cpp: a template that refuses system messages gets the first one merged into the next.
BOOST_AUTO_TEST_CASE(a_template_without_system_role_gets_it_merged_into_the_next_message) {
  const chat_template t("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
                        "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}",
                        smol_tokens);
  BOOST_TEST(t.render(msgs{{"system", "S"}, {"user", "hi"}}, false, 0) == "[user]S\nhi");
  BOOST_TEST(t.render(msgs{{"user", "hi"}}, false, 0) == "[user]hi");
}

BOOST_AUTO_TEST_CASE(a_malformed_template_is_a_clear_error) {
  for (const std::string bad : {"{% for m in messages %}{{ m.content }", "{% if x %}never closed", "{{ 'unterminated }}"}) {
    BOOST_TEST_CONTEXT(bad) {
      try {
        chat_template t(bad, smol_tokens);
        BOOST_FAIL("compiled a malformed template");
      } catch (const chat_template_error& e) {
        const std::string what = e.what();
        BOOST_TEST(what.rfind("chat template does not parse: ", 0) == 0, what);
        BOOST_TEST(what.find('\n') == std::string::npos, what);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_model_without_a_template_gets_chatml) {
  const chat_template t("", smol_tokens);
  BOOST_TEST(t.is_chatml_default());
  BOOST_TEST(t.render(msgs{{"system", "S"}, {"user", "Hi"}}, true, 0) ==
             "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(t.render(msgs{{"user", "Hi"}}, false, 0) == "<|im_start|>user\nHi<|im_end|>\n");
  BOOST_TEST(!chat_template("{{ 'x' }}", smol_tokens).is_chatml_default());
}

BOOST_AUTO_TEST_CASE(bos_text_is_dropped_when_the_tokenizer_adds_bos) {
  const std::string src = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}";
  BOOST_TEST(chat_template(src, {"<s>", "</s>", false, false}).render(msgs{{"user", "x"}}, true, 0) == "<s>x</s>");
  BOOST_TEST(chat_template(src, {"<s>", "</s>", true, false}).render(msgs{{"user", "x"}}, true, 0) == "x</s>");
  BOOST_TEST(chat_template(src, {"<s>", "</s>", true, true}).render(msgs{{"user", "x"}}, true, 0) == "x");
}

BOOST_AUTO_TEST_CASE(developer_messages_are_system_messages) {
  const chat_template t("", smol_tokens);
  BOOST_TEST(t.render(msgs{{"developer", "D"}}, false, 0) == "<|im_start|>system\nD<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(renders_concurrently) {
  const json& g = goldens();
  std::string source;
  for (const json& t : g.at("templates"))
    if (t.at("name") == "meta-llama-Llama-3.1-8B-Instruct.jinja") source = read_template(t);
  BOOST_REQUIRE(!source.empty());
  const chat_template t(source, smol_tokens);
  const msgs m{{"system", "S"}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  const std::string want = t.render(m, true, 0);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) wrong += t.render(m, true, 0) != want;
    });
  for (auto& th : threads) th.join();
  BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
