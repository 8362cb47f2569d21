"""A small in-process stand-in for `conveyor serve` (ROUTER + PUB on loopback, protocol 1), for
the client's tests. Each job "generates" its prompt back in 3-character tokens, one tokens
event per step. Knobs simulate the network's misbehaviour: dropped PUB events, lost replies.
"""
import threading
import time

import msgpack
import zmq

TERMINAL = ("done", "error")


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


class FakeServer:
    def __init__(self, step_s=0.002, drop=None, lose_replies=0, reject=None, model="fake"):
        #: drop(event) -> True: the event is recorded in history but not published.
        self.drop = drop or (lambda event: False)
        #: The first `lose_replies` requests get no reply (the client must resend).
        self.lose_replies = lose_replies
        #: reject(submit map) -> error code or None.
        self.reject = reject or (lambda msg: None)
        self.step_s = step_s
        self.model = model
        self.requests = []          # every decoded request, in arrival order
        self.jobs = {}              # id -> job dict
        self.paused = False         # True: jobs do not advance
        self._ctx = zmq.Context()
        self._router = self._ctx.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.bind("tcp://127.0.0.1:*")
        self._pub = self._ctx.socket(zmq.PUB)
        self._pub.setsockopt(zmq.LINGER, 0)
        self._pub.setsockopt(zmq.SNDHWM, 100000)
        self._pub.bind("tcp://127.0.0.1:*")
        self.router = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.pub = self._pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def close(self):
        self._stop.set()
        self._thread.join()
        self._router.close(0)
        self._pub.close(0)
        self._ctx.term()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- jobs -------------------------------------------------------------------------------
    def _emit(self, job, kind, **fields):
        event = {"id": job["id"], "seq": len(job["history"]), "kind": kind, **fields}
        job["history"].append(event)
        if kind in TERMINAL:
            job["state"] = {"done": "finished", "error": "failed"}[kind]
            if kind == "done" and fields["finish_reason"] == "cancelled":
                job["state"] = "cancelled"
        if not self.drop(event):
            self._pub.send_multipart([("job/%s/" % job["id"]).encode(), pack(event)])

    def _done(self, job, reason):
        n = len(job["out"])
        self._emit(job, "done", finish_reason=reason, text="".join(job["out"]),
                   usage={"prompt_tokens": len(job["prompt"]), "completion_tokens": n,
                          "cached_tokens": 0},
                   timing={"queue_ms": 0.0, "ttft_ms": 1.0 if n else None, "e2e_ms": 2.0})

    def _step(self, job):
        if job["state"] not in ("queued", "running"):
            return
        job["state"] = "running"
        text = job["prompt"]
        pos = 3 * len(job["out"])
        if pos >= len(text) or len(job["out"]) >= job["max_tokens"]:
            self._done(job, "stop" if pos >= len(text) else "length")
            return
        piece = text[pos:pos + 3]
        job["out"].append(piece)
        if job["stream"]:
            self._emit(job, "tokens", token_ids=[len(job["out"])], text=piece)

    # --- requests -------------------------------------------------------------------------------
    def _reply(self, msg):
        op = msg.get("op")
        jid = msg.get("id")
        job = self.jobs.get(jid)
        if op == "submit":
            if job is not None:
                return {"ok": False, "id": jid, "error": {"code": "duplicate",
                                                          "message": "job %s exists" % jid}}
            code = self.reject(msg)
            if code:
                return {"ok": False, "id": jid, "error": {"code": code, "message": "rejected"}}
            prompt = msg.get("prompt") or " ".join(m["content"] for m in msg.get("messages", []))
            job = self.jobs[jid] = {"id": jid, "prompt": prompt, "history": [], "out": [],
                                    "state": "queued", "stream": msg.get("stream", True),
                                    "max_tokens": msg.get("max_tokens", 256)}
            self._emit(job, "accepted")
            return {"ok": True, "id": jid, "topic": "job/%s/" % jid}
        if op in ("cancel", "status", "fetch") and job is None:
            return {"ok": False, "id": jid, "error": {"code": "not_found", "message": "no job"}}
        if op == "cancel":
            if job["state"] in ("queued", "running"):
                self._done(job, "cancelled")
            return {"ok": True, "id": jid, "state": job["state"]}
        if op == "status":
            return {"ok": True, "id": jid, "state": job["state"], "prompt_tokens": 1,
                    "completion_tokens": len(job["out"]), "next_seq": len(job["history"])}
        if op == "fetch":
            start = msg.get("from_seq", 0)
            events = job["history"][start:start + msg.get("max_events", 1024)]
            complete = bool(events) and events[-1]["kind"] in TERMINAL
            return {"ok": True, "id": jid, "events": events, "complete": complete}
        if op == "stats":
            return {"ok": True, "queued": 0, "running": 0, "kv_usage": 0.0}
        if op == "health":
            return {"ok": True, "status": "serving", "protocol": 1, "model": self.model}
        return {"ok": False, "error": {"code": "bad_request", "message": "unknown op",
                                       "field": "op"}}

    def _run(self):
        next_step = time.monotonic()
        while not self._stop.is_set():
            if self._router.poll(1, zmq.POLLIN):
                ident, body = self._router.recv_multipart()
                msg = msgpack.unpackb(body, raw=False)
                self.requests.append(msg)
                reply = self._reply(msg)
                if self.lose_replies > 0:
                    self.lose_replies -= 1
                else:
                    self._router.send_multipart([ident, pack(reply)])
            if time.monotonic() >= next_step and not self.paused:
                next_step = time.monotonic() + self.step_s
                for job in list(self.jobs.values()):
                    self._step(job)
