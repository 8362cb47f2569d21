#include "serve/spec_options.hpp"

#include <nlohmann/json.hpp>

namespace conveyor::serve {

speculative_config default_speculative_config() {
  speculative_config c;
  c.method = spec_method::ngram;
  return c;
}

std::string parse_speculative_config(const std::string& text, speculative_config& out) {
  const std::string where = "speculative_config";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return where + ": not JSON (" + e.what() + "); give an object such as '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'";
  }
  if (!j.is_object()) return where + ": must be a JSON object such as '{\"method\": \"ngram\"}'";
  speculative_config c = out;
  for (const auto& [key, value] : j.items()) {
    const std::string name = where + "." + key;
    if (key == "method") {
      if (!value.is_string()) return name + " must be a string: ngram, draft_model or none";
      const auto m = parse_spec_method(value.get<std::string>());
      if (!m) return name + " '" + value.get<std::string>() + "' is not a method conveyor has; use ngram, draft_model or none";
      c.method = *m;
    } else if (key == "num_speculative_tokens" || key == "prompt_lookup_min" || key == "prompt_lookup_max") {
      if (!value.is_number_integer()) return name + " must be an integer";
      const int64_t v = value.get<int64_t>();
      if (v < 1 || v > 16) return name + " = " + std::to_string(v) + ": must be in [1, 16]";
      (key == "num_speculative_tokens" ? c.num_speculative_tokens : key == "prompt_lookup_min" ? c.prompt_lookup_min : c.prompt_lookup_max) =
          static_cast<int32_t>(v);
    } else if (key == "fixed_cost_tokens") {
      if (!value.is_number() || value.get<double>() < 0) return name + " must be a number >= 0 (0: the executor's estimate)";
      c.fixed_cost_tokens = value.get<double>();
    } else if (key == "model") {
      if (!value.is_string() || value.get<std::string>().empty()) return name + " must be the draft model's GGUF file or name";
      c.model = value.get<std::string>();
    } else {
      return where + ": unknown key '" + key +
             "' (known: method, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, fixed_cost_tokens, model)";
    }
  }
  // vLLM infers the method from a draft model given alone.
  if (!c.model.empty() && !j.contains("method")) c.method = spec_method::draft_model;
  if (c.enabled())
    if (auto e = c.validate(); !e.empty()) return e;
  out = c;
  return {};
}

std::string describe(const speculative_config& c) {
  if (!c.enabled()) return "off";
  if (c.method == spec_method::draft_model)
    return "draft_model " + c.model + ", up to " + std::to_string(c.num_speculative_tokens) + " drafted tokens a step";
  return std::string(to_string(c.method)) + ", up to " + std::to_string(c.num_speculative_tokens) + " drafted tokens a step (lookup " +
         std::to_string(c.prompt_lookup_min) + ".." + std::to_string(c.prompt_lookup_max) + " tokens)";
}

} // namespace conveyor::serve
