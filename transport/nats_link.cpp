#include "transport/nats_link.hpp"

#include <nats/nats.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include "schemas/stored.hpp"

namespace conveyor::transport {

struct nats_link::async_errors {
  std::mutex mu;
  std::set<std::string> failed;  // message ids JetStream refused
  std::string url;
  std::atomic<bool> closing{false};  // our own close: no "disconnected" line
  // nats.c calls the callbacks on its own thread, even after natsConnection_Close returns; the
  // closed callback is the last one: the link waits for it before this state goes away.
  std::condition_variable closed_cv;
  bool closed = false;
};

namespace {

constexpr int64_t ns_per_s = 1000000000;

std::string why(natsStatus s) {
  natsStatus st = s;
  const char* detail = nats_GetLastError(&st);
  std::string text = natsStatus_GetText(s);
  if (detail && *detail && text != detail) text += std::string(": ") + detail;
  return text;
}

void on_disconnected(natsConnection*, void* closure) {
  auto* e = static_cast<nats_link::async_errors*>(closure);
  if (!e->closing)
    std::fprintf(stderr, "conveyor: NATS: disconnected from %s; reconnecting (running jobs go on; their events wait in memory)\n",
                 e->url.c_str());
}
void on_closed(natsConnection*, void* closure) {
  auto* e = static_cast<nats_link::async_errors*>(closure);
  std::lock_guard lk(e->mu);
  e->closed = true;
  e->closed_cv.notify_all();
}
void on_reconnected(natsConnection*, void* closure) {
  std::fprintf(stderr, "conveyor: NATS: reconnected to %s\n", static_cast<nats_link::async_errors*>(closure)->url.c_str());
}

void on_publish_error(jsCtx*, jsPubAckErr* pae, void* closure) {
  auto* e = static_cast<nats_link::async_errors*>(closure);
  const char* id = nullptr;
  if (pae->Msg && natsMsgHeader_Get(pae->Msg, "Nats-Msg-Id", &id) == NATS_OK && id) {
    std::lock_guard lk(e->mu);
    e->failed.insert(id);
  }
}

bool jetstream_missing(natsStatus s, jsErrCode ec) {
  return s == NATS_NO_RESPONDERS || ec == JSNotEnabledErr || ec == JSNotEnabledForAccountErr;
}

} // namespace

nats_job_msg::~nats_job_msg() { natsMsg_Destroy(m_); }
nats_job_msg& nats_job_msg::operator=(nats_job_msg&& o) noexcept {
  if (this != &o) {
    natsMsg_Destroy(m_);
    m_ = o.m_;
    o.m_ = nullptr;
  }
  return *this;
}
std::vector<uint8_t> nats_job_msg::data() const {
  const auto* p = reinterpret_cast<const uint8_t*>(natsMsg_GetData(m_));
  return std::vector<uint8_t>(p, p + natsMsg_GetDataLength(m_));
}
uint64_t nats_job_msg::num_delivered() const {
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, m_) != NATS_OK) return 0;
  const uint64_t n = meta->NumDelivered;
  jsMsgMetaData_Destroy(meta);
  return n;
}
bool nats_job_msg::ack() { return natsMsg_Ack(m_, nullptr) == NATS_OK; }
bool nats_job_msg::in_progress() { return natsMsg_InProgress(m_, nullptr) == NATS_OK; }
bool nats_job_msg::nak() { return natsMsg_Nak(m_, nullptr) == NATS_OK; }
bool nats_job_msg::term() { return natsMsg_Term(m_, nullptr) == NATS_OK; }

nats_link::nats_link(const nats_config& cfg) : cfg_(cfg), errors_(std::make_unique<async_errors>()) {
  errors_->url = cfg_.url;
  if (nats_Open(-1) != NATS_OK) throw nats_error("NATS: the client library did not start");
  natsOptions* o = nullptr;
  natsStatus s = natsOptions_Create(&o);
  // A cluster is a comma-separated list: nats.c takes it as an array of servers.
  std::vector<std::string> urls;
  for (size_t at = 0; at <= cfg_.url.size();) {
    const size_t comma = std::min(cfg_.url.find(',', at), cfg_.url.size());
    if (comma > at) urls.push_back(cfg_.url.substr(at, comma - at));
    at = comma + 1;
  }
  std::vector<const char*> servers;
  for (const auto& u : urls) servers.push_back(u.c_str());
  if (s == NATS_OK) s = natsOptions_SetServers(o, servers.data(), static_cast<int>(servers.size()));
  if (s == NATS_OK) s = natsOptions_SetTimeout(o, static_cast<int64_t>(cfg_.connect_timeout_s * 1000));
  if (s == NATS_OK) s = natsOptions_SetName(o, "conveyor");
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(o, -1);  // forever: a replica outlives NATS restarts
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(o, 250);
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(o, 64 * 1024 * 1024);
  if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(o, on_disconnected, errors_.get());
  if (s == NATS_OK) s = natsOptions_SetReconnectedCB(o, on_reconnected, errors_.get());
  if (s == NATS_OK) s = natsOptions_SetClosedCB(o, on_closed, errors_.get());
  if (s == NATS_OK && !cfg_.creds_file.empty()) s = natsOptions_SetUserCredentialsFromFiles(o, cfg_.creds_file.c_str(), nullptr);
  if (s == NATS_OK && !cfg_.user.empty()) s = natsOptions_SetUserInfo(o, cfg_.user.c_str(), cfg_.password.c_str());
  if (s == NATS_OK && !cfg_.token.empty()) s = natsOptions_SetToken(o, cfg_.token.c_str());
  if (s != NATS_OK) {
    natsOptions_Destroy(o);
    throw nats_error("NATS: bad connection settings for " + cfg_.url + ": " + why(s));
  }
  s = natsConnection_Connect(&nc_, o);
  natsOptions_Destroy(o);
  if (s != NATS_OK)
    throw nats_error("cannot reach NATS at " + cfg_.url + " (" + why(s) +
                     "); start it (nats-server -js) or fix --nats, and check --nats-creds/--nats-user/--nats-token");
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = static_cast<int64_t>(cfg_.connect_timeout_s * 1000);
  jo.PublishAsync.ErrHandler = on_publish_error;
  jo.PublishAsync.ErrHandlerClosure = errors_.get();
  jo.PublishAsync.MaxPending = 65536;
  if ((s = natsConnection_JetStream(&js_, nc_, &jo)) != NATS_OK) {
    close();
    throw nats_error("NATS at " + cfg_.url + ": no JetStream context: " + why(s));
  }
  try {
    ensure_streams();
  } catch (...) {
    close();
    throw;
  }
}

nats_link::~nats_link() { close(); }

void nats_link::close() {
  if (sub_) natsSubscription_Destroy(sub_);
  sub_ = nullptr;
  if (js_) jsCtx_Destroy(js_);
  js_ = nullptr;
  if (!nc_) return;
  errors_->closing = true;
  natsConnection_Close(nc_);
  {
    std::unique_lock lk(errors_->mu);
    errors_->closed_cv.wait_for(lk, std::chrono::seconds(5), [&] { return errors_->closed; });
  }
  natsConnection_Destroy(nc_);
  nc_ = nullptr;
}

void nats_link::ensure_streams() {
  const std::string fix = "; check that nats-server runs with JetStream (-js) and that these credentials may use it";
  auto stream = [&](const std::string& name, const std::string& subject, jsRetentionPolicy retention, double max_age_s) {
    jsStreamInfo* si = nullptr;
    jsErrCode ec = static_cast<jsErrCode>(0);
    natsStatus s = js_GetStreamInfo(&si, js_, name.c_str(), nullptr, &ec);
    if (s == NATS_OK) {
      const bool same = si->Config->Retention == retention;
      jsStreamInfo_Destroy(si);
      if (!same)
        throw nats_error("NATS stream " + name + " exists with another retention policy than conveyor's (" +
                         (retention == js_WorkQueuePolicy ? "work queue" : "limits") + "); delete it or name another stream");
      return;
    }
    if (jetstream_missing(s, ec)) throw nats_error("NATS at " + cfg_.url + " has no JetStream: start nats-server with -js");
    if (s != NATS_NOT_FOUND && ec != JSStreamNotFoundErr) throw nats_error("NATS stream " + name + ": " + why(s) + fix);
    jsStreamConfig c;
    jsStreamConfig_Init(&c);
    const char* subjects[] = {subject.c_str()};
    c.Name = name.c_str();
    c.Subjects = subjects;
    c.SubjectsLen = 1;
    c.Retention = retention;
    c.Storage = js_FileStorage;
    c.Replicas = cfg_.stream_replicas;
    c.Duplicates = static_cast<int64_t>(cfg_.duplicate_window_s * ns_per_s);
    if (max_age_s > 0) c.MaxAge = static_cast<int64_t>(max_age_s * ns_per_s);
    c.AllowDirect = true;  // any replica of a stream answers direct gets: reads survive a leader election
    s = js_AddStream(&si, js_, &c, nullptr, &ec);
    if (s == NATS_OK) jsStreamInfo_Destroy(si);
    else if (ec != JSStreamNameExistErr)  // another replica made it meanwhile
      throw nats_error("cannot create NATS stream " + name + ": " + why(s) + fix);
  };
  stream(cfg_.jobs_stream, cfg_.jobs_subject, js_WorkQueuePolicy, 0);
  stream(cfg_.events_stream, cfg_.events_prefix + ".>", js_LimitsPolicy, cfg_.events_max_age_s);
  stream(cfg_.dead_stream, cfg_.dead_subject, js_LimitsPolicy, 0);

  jsConsumerInfo* ci = nullptr;
  jsErrCode ec = static_cast<jsErrCode>(0);
  natsStatus s = js_GetConsumerInfo(&ci, js_, cfg_.jobs_stream.c_str(), cfg_.consumer.c_str(), nullptr, &ec);
  if (s == NATS_OK) {
    const bool same = ci->Config->AckWait == static_cast<int64_t>(cfg_.ack_wait_s * ns_per_s) && ci->Config->MaxDeliver == cfg_.max_deliver;
    jsConsumerInfo_Destroy(ci);
    if (!same)
      throw nats_error("NATS consumer " + cfg_.consumer + " exists with another --nats-ack-wait or --nats-max-deliver; give every replica the same settings, or name another consumer");
  } else {
    jsConsumerConfig c;
    jsConsumerConfig_Init(&c);
    c.Durable = cfg_.consumer.c_str();
    c.AckPolicy = js_AckExplicit;
    c.AckWait = static_cast<int64_t>(cfg_.ack_wait_s * ns_per_s);
    c.MaxDeliver = cfg_.max_deliver;
    c.MaxAckPending = -1;
    c.FilterSubject = cfg_.jobs_subject.c_str();
    s = js_AddConsumer(&ci, js_, cfg_.jobs_stream.c_str(), &c, nullptr, &ec);
    if (s == NATS_OK) jsConsumerInfo_Destroy(ci);
    else if (ec != JSConsumerNameExistErr && ec != JSConsumerExistingActiveErr)
      throw nats_error("cannot create NATS consumer " + cfg_.consumer + ": " + why(s) + fix);
  }
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = cfg_.jobs_stream.c_str();
  so.Consumer = cfg_.consumer.c_str();
  s = js_PullSubscribe(&sub_, js_, cfg_.jobs_subject.c_str(), cfg_.consumer.c_str(), nullptr, &so, &ec);
  if (s != NATS_OK) throw nats_error("cannot bind to NATS consumer " + cfg_.consumer + ": " + why(s) + fix);
}

std::vector<nats_job_msg> nats_link::fetch(int batch, int64_t timeout_ms, std::string* error) {
  std::vector<nats_job_msg> out;
  natsMsgList list{nullptr, 0};
  jsErrCode ec = static_cast<jsErrCode>(0);
  const natsStatus s = natsSubscription_Fetch(&list, sub_, batch, timeout_ms, &ec);
  if (s == NATS_OK) {
    for (int i = 0; i < list.Count; ++i) {
      out.emplace_back(list.Msgs[i]);
      list.Msgs[i] = nullptr;  // owned by out now
    }
  } else if (s != NATS_TIMEOUT && error) {
    *error = why(s);
  }
  natsMsgList_Destroy(&list);
  return out;
}

std::vector<size_t> nats_link::store(const std::vector<nats_event_out>& events, int64_t wait_ms) {
  std::vector<size_t> confirmed;
  std::vector<std::string> ids(events.size());
  std::vector<bool> sent(events.size(), false);
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    ids[i] = nats_event_msg_id(e.job_id, e.seq);
    jsPubOptions o;
    jsPubOptions_Init(&o);
    o.MsgId = ids[i].c_str();
    const std::string subject = nats_events_subject(cfg_.events_prefix, e.job_id);
    sent[i] = js_PublishAsync(js_, subject.c_str(), e.body.data(), static_cast<int>(e.body.size()), &o) == NATS_OK;
  }
  jsPubOptions w;
  jsPubOptions_Init(&w);
  w.MaxWait = wait_ms;
  std::set<std::string> unconfirmed;
  if (js_PublishAsyncComplete(js_, &w) != NATS_OK) {
    natsMsgList pending{nullptr, 0};
    if (js_PublishAsyncGetPendingList(&pending, js_) == NATS_OK) {
      for (int i = 0; i < pending.Count; ++i) {
        const char* id = nullptr;
        if (natsMsgHeader_Get(pending.Msgs[i], "Nats-Msg-Id", &id) == NATS_OK && id) unconfirmed.insert(id);
      }
      natsMsgList_Destroy(&pending);
    }
  }
  {
    std::lock_guard lk(errors_->mu);
    unconfirmed.insert(errors_->failed.begin(), errors_->failed.end());
    errors_->failed.clear();
  }
  for (size_t i = 0; i < events.size(); ++i)
    if (sent[i] && !unconfirmed.count(ids[i])) confirmed.push_back(i);
  return confirmed;
}

std::optional<std::vector<schemas::wire_bytes>> nats_link::read_events(const std::string& job_id, int64_t wait_ms,
                                                                      std::string* error) {
  const std::string subject = nats_events_subject(cfg_.events_prefix, job_id);
  // Direct gets, message by message along the subject: served by any replica of the stream, no
  // consumer to create (creating one waits for the cluster's meta leader).
  std::vector<schemas::wire_bytes> out;
  uint64_t seq = 1;
  for (;;) {
    jsDirectGetMsgOptions d;
    jsDirectGetMsgOptions_Init(&d);
    d.Sequence = seq;
    d.NextBySubject = subject.c_str();
    natsMsg* m = nullptr;
    const natsStatus s = js_DirectGetMsg(&m, js_, cfg_.events_stream.c_str(), nullptr, &d);
    if (s == NATS_NOT_FOUND) return out;
    if (s != NATS_OK) {
      if (out.empty() && (s == NATS_NO_RESPONDERS || s == NATS_TIMEOUT)) break;  // a stream without AllowDirect
      if (error) *error = "direct get after " + std::to_string(out.size()) + " events: " + why(s);
      return std::nullopt;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(natsMsg_GetData(m));
    out.emplace_back(p, p + natsMsg_GetDataLength(m));
    uint64_t got = natsMsg_GetSequence(m);
    const char* h = nullptr;
    if (got == 0 && natsMsgHeader_Get(m, "Nats-Sequence", &h) == NATS_OK && h) got = std::strtoull(h, nullptr, 10);
    natsMsg_Destroy(m);
    if (got < seq) {
      if (error) *error = "direct get: no stream sequence in the reply";
      return std::nullopt;
    }
    seq = got + 1;
  }
  return read_events_by_consumer(subject, wait_ms, error);
}

// The same through an ordered consumer (a stream made before AllowDirect was set).
std::optional<std::vector<schemas::wire_bytes>> nats_link::read_events_by_consumer(const std::string& subject, int64_t wait_ms,
                                                                                  std::string* error) {
  natsMsg* last = nullptr;
  jsErrCode ec = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&last, js_, cfg_.events_stream.c_str(), subject.c_str(), nullptr, &ec);
  if (s == NATS_NOT_FOUND || ec == JSNoMessageFoundErr) return std::vector<schemas::wire_bytes>{};
  if (s != NATS_OK) {
    if (error) *error = "last message: " + why(s);
    return std::nullopt;
  }
  natsMsg_Destroy(last);
  natsSubscription* sub = nullptr;
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = cfg_.events_stream.c_str();
  so.Ordered = true;
  if ((s = js_SubscribeSync(&sub, js_, subject.c_str(), nullptr, &so, &ec)) != NATS_OK) {
    if (error) *error = "ordered consumer: " + why(s);
    return std::nullopt;
  }
  std::vector<schemas::wire_bytes> out;
  bool ok = false;
  for (;;) {
    natsMsg* m = nullptr;
    if ((s = natsSubscription_NextMsg(&m, sub, wait_ms)) != NATS_OK) {
      if (error) *error = "after " + std::to_string(out.size()) + " events: " + why(s);
      break;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(natsMsg_GetData(m));
    out.emplace_back(p, p + natsMsg_GetDataLength(m));
    jsMsgMetaData* meta = nullptr;
    uint64_t pending = 1;
    if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
      pending = meta->NumPending;
      jsMsgMetaData_Destroy(meta);
    }
    natsMsg_Destroy(m);
    if (pending == 0) {
      ok = true;
      break;
    }
  }
  natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);
  if (!ok) return std::nullopt;
  return out;
}

bool nats_link::dead_letter(const std::string& job_id, const schemas::wire_bytes& body) {
  jsPubOptions o;
  jsPubOptions_Init(&o);
  const std::string id = job_id + ":dead";
  o.MsgId = id.c_str();
  jsPubAck* ack = nullptr;
  const natsStatus s = js_Publish(&ack, js_, cfg_.dead_subject.c_str(), body.data(), static_cast<int>(body.size()), &o, nullptr);
  jsPubAck_Destroy(ack);
  return s == NATS_OK;
}

} // namespace conveyor::transport
