"""Chaos harness, part 2: the load (Producer: jobs submitted over the ROUTER or PUSHed, retried
across the kills) and run_chaos(), which kills and restarts the server under it and then has
chaos_check judge every job. See chaos_harness for the rest.
"""
import os
import random
import threading
import time

import zmq

from chaos_check import check_run
from chaos_harness import Recorder, Requester, Server, log, pack

# Some prompts get multi-byte output (characters split across tokens, and cut by max_tokens).
PROMPTS = ["Write a story about a lighthouse keeper.", "The history of the printing press",
           "def quicksort(xs):", "Dear diary, today", "中文故事：从前有一个", "日本の首都は",
           "Emoji: 😀🎉🐱 and more emoji:", "Привет! Расскажи историю о"]


def make_job(rng, prefix, i, max_tokens=(24, 64), push_every=4):
    job = {"op": "submit", "id": "%s/%d" % (prefix, i),
           "prompt": rng.choice(PROMPTS), "max_tokens": rng.randint(*max_tokens),
           "temperature": 0.7, "ignore_eos": True, "seed": rng.randrange(2 ** 63)}
    if i % 3 == 1:  # partial matches hold text back (also across a restart); a match ends the job
        job["stop"] = [" of the", "\n\n", "。"]
    via = "push" if push_every and i % push_every == push_every - 1 else "router"
    return job, via


class Producer(threading.Thread):
    """Submits jobs one by one: over the ROUTER (lazy pirate across the kills; `accepted`, or
    `duplicate` after an attempt without reply, both mean accepted), or PUSHed (accepted once the
    job's `accepted` event is in its history; pushed again when a restart forgot it)."""

    def __init__(self, server, recorder, rng, prefix, count, interval_s, inflight, max_tokens,
                 push_every):
        super().__init__(daemon=True)
        self.server, self.recorder, self.rng, self.prefix = server, recorder, rng, prefix
        self.count, self.interval_s, self.inflight = count, interval_s, inflight
        self.max_tokens, self.push_every = max_tokens, push_every
        self.jobs = {}   # id -> {"job", "via", "outcome", "attempts", "replies"}
        self.accepted = []
        self.finished = set()  # accepted jobs known to have ended (status), besides live terminals
        self.error = None
        self.halt = threading.Event()
        self.sending = threading.Event()  # set as each submit (or push) goes out

    def unfinished(self):
        return [j for j in self.accepted if j not in self.recorder.terminal and j not in self.finished]

    def run(self):
        req = Requester(self.server)
        push = self.server.ctx.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.connect(self.server.pull)
        try:
            i = 0
            while not self.halt.is_set() and (self.count is None or i < self.count):
                self.halt.wait(self.rng.uniform(*self.interval_s))
                if self.halt.is_set():
                    break
                self._throttle(req)
                job, via = make_job(self.rng, self.prefix, i, self.max_tokens, self.push_every)
                rec = self.jobs[job["id"]] = {"job": job, "via": via, "outcome": None,
                                              "attempts": 0, "replies": []}
                (self._push if via == "push" else self._submit)(req, push, rec)
                if rec["outcome"] in ("accepted", "duplicate_on_retry"):
                    self.accepted.append(job["id"])
                i += 1
        except BaseException as e:  # reported by run_chaos
            self.error = e
        finally:
            push.close(0)
            req.close()

    def _throttle(self, req):
        """Waits while `inflight` accepted jobs are unfinished (statuses once a second)."""
        while self.inflight and len(self.unfinished()) >= self.inflight and not self.halt.is_set():
            for job_id in self.unfinished():
                reply, _ = req.call({"op": "status", "id": job_id})
                if reply.get("state") in ("finished", "cancelled", "failed"):
                    self.finished.add(job_id)
            self.halt.wait(1.0)

    def _submit(self, req, push, rec):
        self.sending.set()
        reply, attempts = req.call(rec["job"])
        rec["attempts"], rec["replies"] = attempts, [reply]
        code = None if reply.get("ok") else (reply.get("error") or {}).get("code")
        if code is None:
            rec["outcome"] = "accepted"
        elif code == "duplicate" and attempts > 1:
            rec["outcome"] = "duplicate_on_retry"
        else:
            rec["outcome"] = "refused:%s (attempt %d)" % (code, attempts)

    def _push(self, req, push, rec):
        job_id, deadline = rec["job"]["id"], time.monotonic() + 60
        while time.monotonic() < deadline:
            self.sending.set()
            push.send(pack(rec["job"]))
            rec["attempts"] += 1
            pushed_in, t_push = self.server.incarnation, time.monotonic()
            while time.monotonic() < deadline:
                got = req.fetch_all(job_id)
                if got and got[0]:
                    first = got[0][0]
                    rec["replies"].append(first)
                    rec["outcome"] = "accepted" if first["kind"] == "accepted" else \
                        "refused:%s (pushed)" % first.get("code")
                    return
                if self.server.incarnation != pushed_in or time.monotonic() - t_push > 10:
                    break  # a restart forgot it (or the frame never arrived): push again
                time.sleep(0.05)
        rec["outcome"] = "push never accepted"


def wait_finished(producer, server, timeout_s):
    """Until every accepted job has ended (live terminal, or status), or timeout_s."""
    req, deadline = Requester(server), time.monotonic() + timeout_s
    try:
        while producer.unfinished() and time.monotonic() < deadline:
            time.sleep(0.5)
            for job_id in producer.unfinished():
                if req.call({"op": "status", "id": job_id})[0].get("state") in ("finished", "cancelled", "failed"):
                    producer.finished.add(job_id)
        return not producer.unfinished()
    finally:
        req.close()


def run_chaos(binary, workdir, seed, kills, jobs=None, interval_s=(0.05, 0.4), inflight=None,
              kill_delay_s=(1.0, 5.0), max_tokens=(24, 64), push_every=4, finish_timeout_s=120,
              poison_after=0, early_kill_p=0.0, submit_kill_p=0.0, extra_args=("--retention", "86400")):
    """One chaos run: start, load, `kills` SIGKILLs at random moments each followed by a restart,
    wait for every accepted job, SIGKILL + restart once more with no load (finished jobs must
    survive it too), then check. jobs=None: steady load until the last kill (inflight caps it).
    poison_after 0 (never) lets every job resume however many kills it runs through; with N > 0
    the server ends such jobs with an `error` event, which the checks then count as poisoned.
    early_kill_p: the chance that the next kill lands during the start-up of the restart after
    a kill (0 to 1.5 s after the spawn) instead of while serving. submit_kill_p: the chance that
    a kill lands 0 to 20 ms after a submit goes out (so that some replies are lost).
    Returns chaos_check.check_run()'s report (a dict)."""
    rng = random.Random(seed)
    state_dir, log_dir = os.path.join(workdir, "state"), os.path.join(workdir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    server = Server(binary, state_dir, log_dir, ("--poison-after", str(poison_after), *extra_args))
    t0 = time.monotonic()
    log("seed %d; state %s; logs %s; endpoints %s %s %s"
        % (seed, state_dir, log_dir, server.router, server.pub, server.pull))
    server.start()
    recorder = Recorder(server)
    recorder.start()
    recorder.wait_live()
    producer = Producer(server, recorder, random.Random(rng.randrange(2 ** 63)), "chaos-%d" % seed,
                        jobs, interval_s, inflight, max_tokens, push_every)
    kill_log = []
    try:
        producer.start()
        k = 0
        while k < kills:
            delay, aligned = rng.uniform(*kill_delay_s), rng.random() < submit_kill_p
            if aligned:  # on the heels of a submit: between its arrival and its reply, often
                time.sleep(delay / 2)
                producer.sending.clear()
                aligned = producer.sending.wait(delay / 2 + 5)
                time.sleep(rng.uniform(0.0, 0.02))
            else:
                time.sleep(delay)
            k += 1
            kill_log.append({"at_s": round(time.monotonic() - t0, 3), "during_start_up": False,
                             "after_submit": aligned,
                             "unfinished": len(producer.unfinished()), "submitted": len(producer.jobs)})
            server.kill9()
            while k < kills and rng.random() < early_kill_p:  # the next kill hits the restart's start-up
                k += 1
                after = rng.uniform(0.0, 1.5)
                server.start(kill_after_s=after)
                kill_log.append({"at_s": round(time.monotonic() - t0, 3), "during_start_up": True, "after_submit": False,
                                 "after_spawn_s": round(after, 3), "unfinished": len(producer.unfinished()),
                                 "submitted": len(producer.jobs)})
            serving = server.start()
            kill_log[-1].update(serving_s=round(serving, 3), resumed=server.journal_lines[-1][1])
            log("kill %d/%d at %.1f s%s: %d accepted jobs unfinished, %d submitted; serving again in "
                "%.2f s, %d resumed" % (k, kills, kill_log[-1]["at_s"], " (during start-up)" if
                                        kill_log[-1]["during_start_up"] else " (after a submit)" if
                                        kill_log[-1]["after_submit"] else "", kill_log[-1]["unfinished"],
                                        len(producer.jobs), serving, server.journal_lines[-1][1]))
        if jobs is None:
            producer.halt.set()
        producer.join(finish_timeout_s)
        drained = wait_finished(producer, server, finish_timeout_s)
        log("load over at %.1f s: %d submitted, %d accepted, all ended: %s"
            % (time.monotonic() - t0, len(producer.jobs), len(producer.accepted), drained))
        time.sleep(0.5)  # the last live events
        req = Requester(server)
        before = {j: req.fetch_all(j) for j in producer.jobs}
        req.close()
        server.kill9()  # quiescent: every finished job must survive a restart as it was
        server.start()
        log("final restart: serving in %.2f s; checking %d jobs" % (server.serving_s[-1], len(producer.jobs)))
        report = check_run(server, recorder, producer, before, poison_ok=poison_after > 0)
        serving = [k["serving_s"] for k in kill_log if "serving_s" in k]  # the restarts under load
        report.update(seed=seed, kills=kills, wall_s=round(time.monotonic() - t0, 1), kill_log=kill_log,
                      mean_restart_to_serving_s=round(sum(serving) / max(1, len(serving)), 3),
                      resumed_total=sum(k.get("resumed", 0) for k in kill_log), producer_error=repr(producer.error)
                      if producer.error else None, all_ended_before_final_restart=drained,
                      server_args=server.args(), server_logs=server.logs())
        if producer.error:
            report["problems"].insert(0, "producer failed: %r" % producer.error)
        return report
    finally:
        producer.halt.set()
        recorder.stop()
        server.kill9()
