// The intake thread's side of the runtime: decodes each frame (schemas/), asks the actors and
// encodes the one reply. Runs on the intake thread only, so it may block on actor answers.
#pragma once

#include <atomic>
#include <string>

#include "actors/request_actor.hpp"
#include "schemas/protocol.hpp"
#include "schemas/replies.hpp"
#include "transport/intake.hpp"

namespace conveyor::actors {

class intake_handler final : public transport::intake_handler {
public:
  intake_handler(caf::actor_system& sys, request_context ctx, schemas::decode_limits limits, std::string model_name,
                 const std::atomic<bool>& draining, std::atomic<int64_t>& live_requests);
  std::vector<uint8_t> on_router(std::span<const uint8_t> frame) override;
  void on_pull(std::span<const uint8_t> frame) override;

private:
  schemas::wire_bytes submit(schemas::submit_request job, bool from_pull);
  schemas::wire_bytes handle(const schemas::decode_result& req);
  schemas::wire_bytes stats();
  /// Encodes an error reply and counts it (conveyor_request_rejected_total).
  schemas::wire_bytes refuse(const schemas::error_reply& reply);
  void count_rejection(schemas::error_code code);

  caf::actor_system& sys_;
  request_context ctx_;
  schemas::decode_limits limits_;
  std::string model_name_;
  const std::atomic<bool>& draining_;
  std::atomic<int64_t>& live_requests_;
};

} // namespace conveyor::actors
