// Chat messages to prompt text with the model's own Jinja chat template (tokenizer.chat_template),
// rendered by llama.cpp's Jinja engine with the context llama.cpp's server gives it, so a prompt
// here is byte for byte the one llama-server builds. A model without a template gets ChatML, as
// in llama.cpp. Compiled once per model; render() is const and safe to call from many threads.
#pragma once

#include <ctime>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace conveyor::model {

class tokenizer;

struct chat_message {
  std::string role;
  std::string content;
};

/// A variable a request gives the template (chat_template_kwargs, e.g. enable_thinking=false):
/// it overrides the one render() would set.
using template_value = std::variant<bool, int64_t, double, std::string>;
using template_kwargs = std::vector<std::pair<std::string, template_value>>;

/// A template that does not parse, or one that refuses the messages (raise_exception) or fails
/// while rendering them. what() is one line: the template's own message where it raised one.
struct chat_template_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class chat_template {
public:
  /// The special tokens' texts the template sees as bos_token / eos_token. When the tokenizer
  /// adds BOS (EOS) itself, a rendered prompt's leading BOS (trailing EOS) text is dropped, as
  /// llama.cpp does, so encoding the prompt does not double it.
  struct special_tokens {
    std::string bos, eos;
    bool add_bos = false, add_eos = false;
  };

  /// Compiles `source`; an empty source means ChatML (llama.cpp's default template).
  /// Throws chat_template_error ("chat template does not parse: ...") for a malformed template.
  chat_template(const std::string& source, special_tokens tokens);
  /// The model's BOS/EOS texts and whether its tokenizer adds them.
  static special_tokens tokens_of(const tokenizer& tok);
  /// The model's template with its BOS/EOS texts and add-BOS/EOS flags. Throws as above.
  static chat_template for_model(const tokenizer& tok);
  chat_template(chat_template&&) noexcept;
  chat_template& operator=(chat_template&&) noexcept;
  ~chat_template();

  /// The prompt for `messages`, ending with the assistant's turn opener when
  /// add_generation_prompt. `now` (local time) feeds date_string / strftime_now, which
  /// Llama 3.x templates print. Throws chat_template_error when the template raises.
  std::string render(std::span<const chat_message> messages, bool add_generation_prompt = true) const;
  std::string render(std::span<const chat_message> messages, bool add_generation_prompt, std::time_t now,
                     const template_kwargs& kwargs = {}) const;

  /// True when the model had no template and ChatML is used.
  bool is_chatml_default() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace conveyor::model
