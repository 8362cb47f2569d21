#include "tools/bench/driver.hpp"

#include "tools/bench/sequencer.hpp"

#include <zmq.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <deque>
#include <random>

namespace conveyor::bench {
namespace {

using clock_type = std::chrono::steady_clock;

struct job_state {
  sequencer seq;
  bool ended = false, replied = false, fetching = false, stall_fetch = false;
  double last_event_s = 0.0, stall_after_s = 0.0, retry_at_s = -1.0, backoff_s = 0.05;
};

enum class pending_kind { submit, fetch };

class run {
public:
  run(const driver_options& o, const std::vector<bench_request>& reqs)
      : o_(o), reqs_(reqs), dealer_(ctx_, zmq::socket_type::dealer), sub_(ctx_, zmq::socket_type::sub),
        jobs_(reqs.size()) {
    r_.run_prefix = o.run_prefix.empty() ? random_prefix() : o.run_prefix;
    r_.timelines.resize(reqs.size());
    for (auto* s : {&dealer_, &sub_}) s->set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::rcvhwm, 0);  // never drop on the client side; the run bounds memory
    dealer_.connect(o.router_ep);
    sub_.connect(o.pub_ep);
  }

  driver_result go(const std::function<void(const progress&)>& on_progress) {
    connect();
    t0_ = clock_type::now();
    double last_progress = -1.0, last_scan = 0.0;
    size_t next = 0;
    std::vector<size_t> retries;
    while (ended_ < static_cast<int32_t>(reqs_.size())) {
      double now = elapsed();
      if (o_.timeout_s > 0 && now > o_.timeout_s) break;
      for (size_t k = 0; k < retries.size();)
        if (jobs_[retries[k]].retry_at_s <= now) {
          jobs_[retries[k]].retry_at_s = -1.0;
          ++r_.num_retries;
          send_submit(retries[k], false);
          retries[k] = retries.back();
          retries.pop_back();
        } else {
          ++k;
        }
      while (next < reqs_.size() && reqs_[next].arrival_s <= now && (o_.max_concurrency <= 0 || in_flight_ < o_.max_concurrency))
        send_submit(next++, true);
      double wait_s = 0.1;
      if (next < reqs_.size() && (o_.max_concurrency <= 0 || in_flight_ < o_.max_concurrency))
        wait_s = std::min(wait_s, reqs_[next].arrival_s - now);
      zmq::pollitem_t items[] = {{sub_.handle(), 0, ZMQ_POLLIN, 0}, {dealer_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(static_cast<long>(std::ceil(std::max(wait_s, 0.0) * 1e3))));
      drain_sub();
      drain_dealer(retries);
      now = elapsed();
      if (now - last_scan >= 0.1) {
        last_scan = now;
        for (size_t i = 0; i < next; ++i) {
          job_state& j = jobs_[i];
          if (j.replied && !j.ended && !j.fetching && now - j.last_event_s > j.stall_after_s) send_fetch(i, true);
        }
      }
      if (on_progress && now - last_progress >= 0.1) {
        last_progress = now;
        on_progress(snapshot(next, now));
      }
    }
    const double stop = elapsed();
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (!jobs_[i].ended) {
        ++r_.unfinished;
        r_.timelines[i].end_s = stop;
      }
    if (on_progress) on_progress(snapshot(next, stop));
    return std::move(r_);
  }

private:
  static std::string random_prefix() {
    std::random_device rd;
    char buf[32];
    std::snprintf(buf, sizeof buf, "bench-%08x%04x", rd(), rd() & 0xffff);
    return buf;
  }

  double elapsed() const { return std::chrono::duration<double>(clock_type::now() - t0_).count(); }
  std::string job_id(size_t i) const { return r_.run_prefix + "/" + std::to_string(i); }
  progress snapshot(size_t sent, double now) const {
    return {ended_, static_cast<int32_t>(sent), static_cast<int32_t>(reqs_.size()), r_.streamed_output_tokens, now};
  }

  void connect() {
    const std::string health = encode_health();
    dealer_.send(zmq::buffer(health), zmq::send_flags::none);
    const auto timeout = std::chrono::milliseconds(static_cast<long>(o_.connect_timeout_s * 1e3));
    zmq::pollitem_t item{dealer_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::message_t msg;
    if (zmq::poll(&item, 1, timeout) <= 0 || !dealer_.recv(msg, zmq::recv_flags::dontwait))
      throw connect_error("no reply from --router " + o_.router_ep + " within " + std::to_string(o_.connect_timeout_s) +
                          " s; is `conveyor serve` listening there?");
    if (auto rep = dec_.reply(msg.data(), msg.size())) r_.model = rep->model;
    // Slow joiner: the job subscription goes first, so a heartbeat seen means it is live too.
    sub_.set(zmq::sockopt::subscribe, "job/" + r_.run_prefix + "/");
    sub_.set(zmq::sockopt::subscribe, "sys/");
    const auto until = clock_type::now() + timeout;
    zmq::pollitem_t sitem{sub_.handle(), 0, ZMQ_POLLIN, 0};
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now());
      if (left.count() <= 0 || zmq::poll(&sitem, 1, left) <= 0)
        throw connect_error("no heartbeat on --pub " + o_.pub_ep + " within " + std::to_string(o_.connect_timeout_s) +
                            " s; is it the same server's PUB endpoint?");
      zmq::message_t topic, body;
      if (!sub_.recv(topic, zmq::recv_flags::dontwait)) continue;
      while (topic.more() && sub_.recv(body, zmq::recv_flags::dontwait) && body.more()) {}
      if (topic.to_string_view().starts_with("sys/")) break;
    }
    sub_.set(zmq::sockopt::unsubscribe, "sys/");
  }

  void send_submit(size_t i, bool first) {
    const std::string frame = encode_submit(reqs_[i], job_id(i), with_seed(i));
    const double now = elapsed();
    if (first) {
      r_.timelines[i].sent = true;
      r_.timelines[i].send_s = now;
      ++in_flight_;
      jobs_[i].stall_after_s = o_.stall_s;
    }
    jobs_[i].last_event_s = now;
    dealer_.send(zmq::buffer(frame), zmq::send_flags::none);
    pending_.emplace_back(pending_kind::submit, i);
  }

  submit_settings with_seed(size_t i) const {
    submit_settings s = o_.submit;
    if (s.seed) *s.seed += i;
    return s;
  }

  void send_fetch(size_t i, bool stall) {
    jobs_[i].fetching = true;
    jobs_[i].stall_fetch = stall;
    ++r_.num_fetches;
    dealer_.send(zmq::buffer(encode_fetch(job_id(i), jobs_[i].seq.next_seq(), 4096)), zmq::send_flags::none);
    pending_.emplace_back(pending_kind::fetch, i);
  }

  void end(size_t i, double now) {
    jobs_[i].ended = true;
    r_.timelines[i].end_s = now;
    --in_flight_;
    ++ended_;
  }

  // Records one event, delivered in seq order at `now`.
  void record(size_t i, const event_view& e, double now) {
    request_timeline& t = r_.timelines[i];
    switch (e.kind) {
      case event_kind::tokens:
        t.chunks.push_back({now, e.num_tokens});
        r_.streamed_output_tokens += e.num_tokens;
        break;
      case event_kind::done:
        t.completed = true;
        t.prompt_tokens = e.prompt_tokens;
        t.output_tokens = e.completion_tokens;
        ++r_.finish_reasons[e.finish_reason];
        end(i, now);
        break;
      case event_kind::error:
        ++r_.failed;
        ++r_.error_codes[e.error_code];
        end(i, now);
        break;
      case event_kind::accepted:
      case event_kind::other: break;
    }
  }

  std::optional<size_t> index_of(std::string_view id) const {
    const std::string_view p = r_.run_prefix;
    if (id.size() <= p.size() + 1 || !id.starts_with(p) || id[p.size()] != '/') return std::nullopt;
    size_t i = 0;
    const char* b = id.data() + p.size() + 1;
    const auto [ptr, ec] = std::from_chars(b, id.data() + id.size(), i);
    if (ec != std::errc() || ptr != id.data() + id.size() || i >= jobs_.size()) return std::nullopt;
    return i;
  }

  void on_live_event(event_view&& e, double now) {
    const auto i = index_of(e.id);
    if (!i || jobs_[*i].ended) return;  // not ours, or over
    job_state& j = jobs_[*i];
    j.last_event_s = now;
    j.stall_after_s = o_.stall_s;
    const bool behind_hole = j.seq.on_live(std::move(e), [&](const event_view& d) { record(*i, d, now); });
    if (behind_hole && !j.fetching) {
      ++r_.num_gaps;
      send_fetch(*i, false);
    }
  }

  void on_fetch_reply(size_t i, const std::optional<reply_view>& rep, double now) {
    job_state& j = jobs_[i];
    j.fetching = false;
    if (!rep || !rep->ok || j.ended) return;
    const int fresh = j.seq.on_fetched(rep->events, [&](const event_view& d) { record(i, d, now); });
    if (j.stall_fetch && fresh > 0) ++r_.num_gaps;
    if (fresh > 0 || j.stall_fetch) {
      j.last_event_s = now;
      j.stall_after_s = fresh > 0 ? o_.stall_s : std::min(8.0, j.stall_after_s * 2);
    }
    if (!j.ended && j.seq.has_hole()) send_fetch(i, false);
  }

  void drain_sub() {
    for (int k = 0; k < 65536; ++k) {
      if (!sub_.recv(topic_, zmq::recv_flags::dontwait)) return;
      if (!topic_.more()) continue;
      bool body_ok = static_cast<bool>(sub_.recv(body_, zmq::recv_flags::dontwait));
      while (body_.more() && sub_.recv(extra_, zmq::recv_flags::dontwait) && extra_.more()) body_ok = false;
      if (!body_ok || !topic_.to_string_view().starts_with("job/")) continue;
      if (auto e = dec_.event(body_.data(), body_.size())) on_live_event(std::move(*e), elapsed());
    }
  }

  void drain_dealer(std::vector<size_t>& retries) {
    zmq::message_t msg;
    while (dealer_.recv(msg, zmq::recv_flags::dontwait)) {
      if (pending_.empty()) continue;
      const auto [kind, i] = pending_.front();
      pending_.pop_front();
      const double now = elapsed();
      const auto rep = dec_.reply(msg.data(), msg.size());
      job_state& j = jobs_[i];
      if (kind == pending_kind::fetch) {
        on_fetch_reply(i, rep, now);
        continue;
      }
      if (rep && (rep->ok || rep->code == conveyor::error_code::duplicate)) {
        j.replied = true;
      } else if (rep && rep->code == conveyor::error_code::overloaded && o_.retry_overloaded) {
        j.retry_at_s = now + j.backoff_s;
        j.backoff_s = std::min(1.0, j.backoff_s * 2);
        retries.push_back(i);
      } else if (!j.ended) {
        if (rep && rep->code == conveyor::error_code::overloaded) {
          ++r_.rejected;
        } else {
          ++r_.failed;
          ++r_.error_codes[rep ? rep->error_code : "malformed_reply"];
        }
        end(i, now);
      }
    }
  }

  const driver_options& o_;
  const std::vector<bench_request>& reqs_;
  zmq::context_t ctx_;
  zmq::socket_t dealer_, sub_;
  zmq::message_t topic_, body_, extra_;
  decoder dec_;
  std::vector<job_state> jobs_;
  std::deque<std::pair<pending_kind, size_t>> pending_;  // DEALER replies come in request order
  driver_result r_;
  clock_type::time_point t0_;
  int32_t in_flight_ = 0, ended_ = 0;
};

} // namespace

driver_result run_driver(const driver_options& o, const std::vector<bench_request>& requests,
                         const std::function<void(const progress&)>& on_progress) {
  return run(o, requests).go(on_progress);
}

} // namespace conveyor::bench
