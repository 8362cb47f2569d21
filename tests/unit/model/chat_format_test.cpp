// format_chatml: plain ChatML, the default system message taken from the template text (SmolLM2's
// and other sentences, quoting styles, Qwen-style else branches), multi-turn and generation
// prompts, and the SmolLM2 renderings that llama-cpp-python's Jinja produced (golden file).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "model/tokenizer.hpp"

using namespace conveyor::model;
using msgs = std::vector<chat_message>;

namespace {

// SmolLM2's template, as it is stored in the GGUF (model-format.md §5.7).
const std::string smollm2_template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const std::string smol_system =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";

} // namespace

BOOST_AUTO_TEST_SUITE(chat_format)

BOOST_AUTO_TEST_CASE(injects_the_template_system_message_when_missing) {
  const msgs m{{"user", "Hi"}};
  BOOST_TEST(format_chatml(m, smollm2_template) ==
             smol_system + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

BOOST_AUTO_TEST_CASE(keeps_an_explicit_system_message) {
  const msgs m{{"system", "Be brief."}, {"user", "Hi"}};
  BOOST_TEST(format_chatml(m, smollm2_template) ==
             "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

BOOST_AUTO_TEST_CASE(multi_turn_without_generation_prompt) {
  const msgs m{{"user", "2+2?"}, {"assistant", "4"}, {"user", "3+3?"}};
  BOOST_TEST(format_chatml(m, smollm2_template, false) ==
             smol_system + "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                           "<|im_start|>user\n3+3?<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(empty_template_is_plain_chatml) {
  const msgs m{{"user", "Hi"}};
  BOOST_TEST(format_chatml(m, "") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  BOOST_TEST(format_chatml(m, "", false) == "<|im_start|>user\nHi<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(no_messages) {
  BOOST_TEST(format_chatml(msgs{}, smollm2_template) == "<|im_start|>assistant\n");
  BOOST_TEST(format_chatml(msgs{}, smollm2_template, false).empty());
}

BOOST_AUTO_TEST_CASE(the_sentence_comes_from_the_template_not_the_code) {
  const std::string tpl =
      "{%- for message in messages %}{%- if loop.first and messages[0][\"role\"] != \"system\" -%}"
      "{{- \"<|im_start|>system\\nYou are Robo, say \\\"hi\\\".<|im_end|>\\n\" -}}{%- endif -%}"
      "{{ '<|im_start|>' + message['role'] }}{% endfor %}";
  BOOST_TEST(format_chatml(msgs{{"user", "x"}}, tpl, false) ==
             "<|im_start|>system\nYou are Robo, say \"hi\".<|im_end|>\n<|im_start|>user\nx<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(qwen_style_else_branch) {
  const std::string tpl =
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
      "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\n' + 'You are Qwen.' + '<|im_end|>\\n' }}"
      "{%- endif %}";
  BOOST_TEST(format_chatml(msgs{{"user", "x"}}, tpl, false) ==
             "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n");
  BOOST_TEST(format_chatml(msgs{{"system", "S"}}, tpl, false) == "<|im_start|>system\nS<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(branch_that_is_not_a_literal_injects_nothing) {
  const std::string tpl =
      "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n' + default_system + '<|im_end|>\n' }}"
      "{% endif %}";
  BOOST_TEST(format_chatml(msgs{{"user", "x"}}, tpl, false) == "<|im_start|>user\nx<|im_end|>\n");
  // A literal that is not a ChatML system turn is not taken either.
  const std::string other = "{% if messages[0]['role'] != 'system' %}{{ 'Hello' }}{% endif %}";
  BOOST_TEST(format_chatml(msgs{{"user", "x"}}, other, false) == "<|im_start|>user\nx<|im_end|>\n");
}

BOOST_AUTO_TEST_CASE(matches_llama_cpp_python_jinja_rendering) {
  std::ifstream in(std::string(CONVEYOR_TEST_DATA) + "/smollm2_tokenize.json");
  BOOST_REQUIRE_MESSAGE(in.good(), "tests/data/smollm2_tokenize.json missing. HINT: run tools/make_tokenizer_goldens.py");
  const auto doc = nlohmann::json::parse(in);
  const auto tpl = doc.at("chat_template").get<std::string>();
  BOOST_TEST(tpl == smollm2_template);
  BOOST_REQUIRE(!doc.at("chat").empty());
  for (const auto& c : doc.at("chat")) {
    msgs m;
    for (const auto& x : c.at("messages")) m.push_back({x.at("role"), x.at("content")});
    BOOST_TEST(format_chatml(m, tpl, c.at("add_generation_prompt").get<bool>()) == c.at("rendered").get<std::string>(),
               c.at("messages").dump());
  }
}

BOOST_AUTO_TEST_SUITE_END()
