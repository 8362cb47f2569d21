// The NATS JetStream settings of a replica (`conveyor serve --nats URL` and the --nats-* flags)
// and the subject names every side derives from them (the Python client does the same; see
// docs/scaling.md). Pure: no NATS headers here.
//
//   <jobs_subject>                 work-queue stream <jobs_stream>: submit maps, msg id = job id
//   <events_prefix>.<id tokens>    stream <events_stream>: each job's events, msg id "<id>:<seq>"
//   <dead_subject>                 stream <dead_stream>: jobs that were not run, with the error
#pragma once

#include <cstdint>
#include <string>

namespace conveyor::transport {

struct nats_config {
  std::string url;  ///< nats://HOST:PORT (comma-separated for a cluster); empty: NATS off
  std::string creds_file, user, password, token;  ///< credentials (all optional)
  std::string jobs_stream = "CONVEYOR_JOBS";
  std::string jobs_subject = "conveyor.jobs";
  std::string consumer = "conveyor";  ///< the durable pull consumer every replica shares
  std::string events_stream = "CONVEYOR_EVENTS";
  std::string events_prefix = "conveyor.events";
  std::string dead_stream = "CONVEYOR_DEAD";
  std::string dead_subject = "conveyor.dead";
  double ack_wait_s = 30.0;        ///< a job not acked (nor in progress) this long is redelivered
  int32_t max_deliver = 5;         ///< the delivery that reaches this count is dead-lettered, not run
  int32_t stream_replicas = 1;     ///< JetStream replicas of the streams this replica creates
  double events_max_age_s = 86400; ///< how long the events stream keeps a job's events
  double duplicate_window_s = 600; ///< JetStream de-duplication window (jobs and events)
  double connect_timeout_s = 5.0;

  bool enabled() const { return !url.empty(); }
  /// "" when usable, else what is wrong and the fix.
  std::string validate() const;
};

/// The subject of a job's events: the id's '/'-separated parts become subject tokens (so
/// `<prefix>.batch-7.>` is every job of `batch-7/`), a '.' inside a part is written %2E and an
/// empty part is %.
std::string nats_events_subject(const std::string& prefix, const std::string& job_id);
/// The JetStream message id of one event: "<job id>:<seq>".
std::string nats_event_msg_id(const std::string& job_id, uint64_t seq);

} // namespace conveyor::transport
