// Internal to the HTTP intake: one request's answer from its jobs, one per choice (OpenAI's `n`).
// http_intake.cpp reads the body; http_choices.cpp runs the jobs and writes the answer.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/http_server.hpp"
#include "transport/openai_request.hpp"

namespace conveyor::transport {

class http_intake;

using header_list = std::vector<std::pair<std::string, std::string>>;

/// An error as the whole answer (429 and 503 add Retry-After).
void send_error(http_exchange& x, const openai_error& e, header_list headers = {});

/// Runs request `r` as r->n jobs (`id` for one, `id`/0 .. `id`/(n-1) for several; choice i samples
/// with seed + i when a seed is given) and answers `x` with every choice: one JSON body, or one
/// stream whose chunks carry their choice's index. Choices after the first start once the first
/// has produced a token, so its prompt is in the prefix cache for them.
void answer_with_jobs(http_intake& in, std::shared_ptr<http_exchange> x, std::shared_ptr<openai_request> r, std::string id,
                      bool client_id);

} // namespace conveyor::transport
