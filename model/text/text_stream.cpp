#include "model/text/text_stream.hpp"

#include <algorithm>

#include "model/text/unicode_bytes.hpp"

namespace conveyor::model {

text_stream::text_stream(const tokenizer& tok, std::vector<std::string> stop_strings) : detok_(tok) {
  for (auto& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

void text_stream::append(const std::string& raw) {
  if (stopped_ || raw.empty()) return;
  // Every published string is UTF-8: bytes that are not (a model can emit any byte sequence;
  // a job can end inside a character) become U+FFFD, one per byte.
  const std::string delta = sanitize_utf8(raw);
  const size_t old = text_.size();
  text_ += delta;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    // Only a match that includes new bytes can be new.
    const size_t from = old >= s.size() - 1 ? old - (s.size() - 1) : 0;
    cut = std::min(cut, text_.find(s, from));
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    taken_ = std::min(taken_, cut);
    stopped_ = true;
  }
}

bool text_stream::push(token_id id) {
  if (!stopped_) append(detok_.push(id));
  return stopped_;
}

void text_stream::finish() {
  if (!stopped_) append(detok_.flush());
}

std::string text_stream::take_visible(bool final) {
  size_t limit = text_.size();
  if (!final && !stopped_) {
    // Hold back the longest tail that is the start of some stop string.
    size_t hold = 0;
    for (const auto& s : stops_)
      for (size_t k = std::min(s.size() - 1, text_.size() - taken_); k > hold; --k)
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    limit -= hold;
    while (limit > taken_ && limit < text_.size() && (static_cast<unsigned char>(text_[limit]) & 0xC0) == 0x80) --limit;
  }
  std::string out = text_.substr(taken_, limit - taken_);
  taken_ = limit;
  return out;
}

} // namespace conveyor::model
