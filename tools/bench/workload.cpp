#include "tools/bench/workload.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/enum_names.hpp"
#include "engine/sim/workload.hpp"

namespace conveyor::bench {

namespace {

constexpr auto workload_names = make_enum_names<workload_name>(
    {{workload_name::random, "random"}, {workload_name::anyscale, "anyscale"}, {workload_name::chat, "chat"},
     {workload_name::file, "file"}});
constexpr auto length_dist_names = make_enum_names<length_dist>(
    {{length_dist::fixed, "fixed"}, {length_dist::uniform, "uniform"}, {length_dist::capped_exponential, "capped-exp"},
     {length_dist::lognormal, "lognormal"}});

} // namespace

std::optional<workload_name> parse_workload_name(const std::string& text) { return workload_names.parse(text); }
std::optional<length_dist> parse_length_dist(const std::string& text) { return length_dist_names.parse(text); }
const char* to_string(workload_name w) { return workload_names.name(w); }
const char* to_string(length_dist d) { return length_dist_names.name(d); }

std::string workload_options::validate() const {
  if (auto err = validate_lengths(true); !err.empty())
    return err;
  if (!(lognormal_sigma > 0.0 && std::isfinite(lognormal_sigma))) return "--lognormal-sigma must be > 0";
  if (vocab_size <= 100) return "--vocab-size must be > 100 (prompt ids are drawn from [100, vocab-size))";
  return {};
}

int32_t draw_length(std::mt19937_64& rng, length_dist dist, int32_t len, double range_ratio,
                    double sigma, int32_t cap) {
  switch (dist) {
    case length_dist::fixed: return len;
    case length_dist::uniform: {
      const auto lo = std::max<int32_t>(1, static_cast<int32_t>(std::floor(len * (1.0 - range_ratio))));
      const auto hi = std::max<int32_t>(lo, static_cast<int32_t>(std::ceil(len * (1.0 + range_ratio))));
      return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
    }
    case length_dist::capped_exponential: {
      // As Anyscale's gen_random_response_lens: draw, resample while above the cap; at least 1.
      std::exponential_distribution<double> exp(1.0 / len);
      for (;;) {
        const auto v = static_cast<int64_t>(std::llround(exp(rng)));
        if (v <= cap) return static_cast<int32_t>(std::max<int64_t>(v, 1));
      }
    }
    case length_dist::lognormal: {
      // Mean `len`: mu = ln(len) - sigma^2 / 2. Clamped to [1, cap].
      std::lognormal_distribution<double> logn(std::log(static_cast<double>(len)) - sigma * sigma / 2.0, sigma);
      const double v = std::round(logn(rng));
      return static_cast<int32_t>(std::clamp(v, 1.0, static_cast<double>(cap)));
    }
  }
  return len;
}

namespace {

constexpr int32_t first_safe_id = 100;

int32_t id_limit(const workload_options& o) { return std::min(o.vocab_size, 50001); }

void random_ids(std::mt19937_64& rng, std::vector<int32_t>& ids, int32_t n, const workload_options& o) {
  std::uniform_int_distribution<int32_t> token(first_safe_id, id_limit(o) - 1);
  ids.resize(n);
  for (int32_t& id : ids) id = token(rng);
}

// Everyday words; with a BPE vocabulary each is about one token (with its leading space).
constexpr const char* words[] = {
    "the", "data", "model", "will", "take", "time", "small", "large", "river", "stone", "light",
    "paper", "table", "window", "city", "road", "number", "answer", "question", "simple",
    "green", "water", "music", "story", "house", "friend", "market", "summer", "winter", "train",
    "letter", "garden", "north", "south", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
    "please", "explain", "why", "how", "what", "when", "list", "three", "reasons", "short",
    "write", "about", "and", "or", "with", "from", "into", "every", "good", "best", "first", "last"};

std::string random_text(std::mt19937_64& rng, int32_t num_words) {
  std::uniform_int_distribution<size_t> pick(0, std::size(words) - 1);
  std::string s;
  for (int32_t i = 0; i < num_words; ++i) {
    if (i) s += ' ';
    s += words[pick(rng)];
  }
  return s;
}

bench_request chat_request(std::mt19937_64& rng, const workload_options& o) {
  bench_request r;
  const int32_t exchanges = std::uniform_int_distribution<int32_t>(0, 2)(rng);
  const int32_t turns = 2 + 2 * exchanges;  // system, (user, assistant) x exchanges, user
  const int32_t per_turn = std::max(1, o.input_len / turns);
  r.messages.push_back({"system", "You are a helpful assistant. " + random_text(rng, std::max(1, per_turn / 4))});
  for (int32_t i = 0; i < exchanges; ++i) {
    r.messages.push_back({"user", random_text(rng, draw_length(rng, length_dist::lognormal, per_turn, 0, 0.6, 8 * per_turn))});
    r.messages.push_back({"assistant", random_text(rng, draw_length(rng, length_dist::lognormal, per_turn, 0, 0.6, 8 * per_turn))});
  }
  r.messages.push_back({"user", random_text(rng, draw_length(rng, length_dist::lognormal, per_turn, 0, 0.6, 8 * per_turn))});
  r.max_tokens = draw_length(rng, length_dist::lognormal, o.output_len, 0, o.lognormal_sigma, o.cap);
  r.force_length = o.ignore_eos;
  return r;
}

} // namespace

std::vector<bench_request> make_requests(const workload_options& o) {
  std::vector<bench_request> out;
  if (o.name == workload_name::anyscale) {
    sim::workload_params p;
    p.kind = sim::workload_kind::anyscale;
    p.num_prompts = o.num_prompts;
    p.input_len = o.anyscale_input_len;
    p.output_len = 128;
    p.cap = o.cap;
    p.seed = o.seed;
    // sim draws ids from [10, 50000]; fold the few outside [100, limit) back into it.
    const int32_t lo = first_safe_id, hi = id_limit(o);
    for (sim::sim_request& s : sim::make_workload(p)) {
      bench_request r;
      r.prompt_tokens.assign(s.prompt.begin(), s.prompt.end());
      for (int32_t& id : r.prompt_tokens)
        if (id < lo || id >= hi) id = lo + id % (hi - lo);
      r.max_tokens = s.output_len;
      r.force_length = true;
      out.push_back(std::move(r));
    }
    return out;
  }
  std::mt19937_64 rng(o.seed);
  for (int32_t i = 0; i < o.num_prompts; ++i) {
    if (o.name == workload_name::chat) {
      out.push_back(chat_request(rng, o));
      continue;
    }
    bench_request r;
    const int32_t in = draw_length(rng, o.input_dist, o.input_len, o.range_ratio, o.lognormal_sigma, o.cap);
    r.max_tokens = draw_length(rng, o.output_dist, o.output_len, o.range_ratio, o.lognormal_sigma, o.cap);
    random_ids(rng, r.prompt_tokens, in, o);
    r.force_length = true;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<bench_request> read_requests(std::istream& in, const workload_options& o) {
  using nlohmann::json;
  std::vector<bench_request> lines;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto fail = [&](const std::string& why) {
      return std::invalid_argument("line " + std::to_string(lineno) + ": " + why);
    };
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) throw fail("not a JSON object");
    bench_request r;
    try {
      const int forms = j.contains("prompt") + j.contains("messages") + j.contains("prompt_tokens");
      if (forms != 1) throw fail("needs exactly one of \"prompt\", \"messages\", \"prompt_tokens\"");
      if (j.contains("prompt")) r.prompt = j["prompt"].get<std::string>();
      if (j.contains("prompt_tokens")) r.prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
      if (j.contains("messages"))
        for (const json& m : j["messages"]) r.messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
      r.max_tokens = j.contains("max_tokens") ? j["max_tokens"].get<int32_t>() : o.output_len;
    } catch (const json::exception& e) {
      throw fail(e.what());
    }
    if (r.max_tokens < 1) throw fail("\"max_tokens\" must be >= 1");
    r.force_length = o.ignore_eos;
    lines.push_back(std::move(r));
  }
  if (lines.empty()) throw std::invalid_argument("no prompts (expected one JSON object per line)");
  std::vector<bench_request> out;
  for (int32_t i = 0; i < o.num_prompts; ++i) out.push_back(lines[i % lines.size()]);
  return out;
}

std::vector<double> arrival_times(int32_t n, const arrival_options& a, uint64_t seed) {
  std::vector<double> t(std::max(n, 0), 0.0);
  if (std::isinf(a.request_rate)) return t;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  // vLLM: theta = 1 / (rate * burstiness); gaps ~ Gamma(shape = burstiness, scale = theta).
  std::gamma_distribution<double> gap(a.burstiness, 1.0 / (a.request_rate * a.burstiness));
  for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] + gap(rng);
  return t;
}

} // namespace conveyor::bench
