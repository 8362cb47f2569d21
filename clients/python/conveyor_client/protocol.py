"""Protocol 1 vocabulary shared by Client and AsyncClient: ids, topics, request maps, replies.

The spec is schemas/protocol.md in the conveyor repository. Nothing here touches a socket.
"""
import re
import uuid

import msgpack

PROTOCOL_VERSION = 1
DEFAULT_ROUTER = "tcp://127.0.0.1:5555"
DEFAULT_PUB = "tcp://127.0.0.1:5556"
DEFAULT_PULL = "tcp://127.0.0.1:5557"
HEARTBEAT_TOPIC = "sys/"
TERMINAL_KINDS = ("done", "error")
ERROR_CODES = ("bad_request", "too_long", "overloaded", "duplicate", "not_found",
               "shutting_down", "internal")

# submit's optional parameters (everything except id and the prompt), with the server defaults.
SUBMIT_DEFAULTS = {
    "max_tokens": 256, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
    "seed": None, "stop": [], "stop_token_ids": [], "ignore_eos": False, "min_tokens": 0,
    "priority": 0, "deadline_ms": None, "logprobs": False, "stream": True,
    "top_logprobs": 0, "response_format": None,
    "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "logit_bias": None,
    "chat_template_kwargs": None, "prompt_logprobs": None, "token_bytes": False, "speculate": True,
}

_ID_RE = re.compile(r"[A-Za-z0-9._:/-]{1,128}\Z")


class ConveyorError(Exception):
    """The server refused a request (an error reply) or a job failed (an error event).

    code is one of ERROR_CODES (or "timeout" for client-side timeouts); field names the offending
    request key for bad_request; id is the job's id when known.
    """

    def __init__(self, code, message, field=None, id=None):
        super().__init__("%s: %s%s" % (code, message, " (field %s)" % field if field else ""))
        self.code = code
        self.message = message
        self.field = field
        self.id = id


class ConveyorTimeout(ConveyorError, TimeoutError):
    """No reply, or no terminal event, within the timeout."""

    def __init__(self, message, id=None):
        super().__init__("timeout", message, None, id)


def valid_id(job_id):
    """True when job_id is 1..128 characters of [A-Za-z0-9._:/-]."""
    return isinstance(job_id, str) and _ID_RE.match(job_id) is not None


def topic_for(job_id):
    """The PUB topic of a job's events: "job/<id>/"."""
    return "job/%s/" % job_id


def new_id():
    return str(uuid.uuid4())


def build_submit(id=None, prompt=None, messages=None, prompt_tokens=None, **params):
    """The submit map for these arguments: None values are left out (the server's defaults apply),
    a single stop string becomes a list. Raises ValueError for a bad id or not exactly one of
    prompt/messages/prompt_tokens, TypeError for an unknown parameter name."""
    job_id = new_id() if id is None else id
    if not valid_id(job_id):
        raise ValueError("job id must be 1-128 characters of [A-Za-z0-9._:/-], got %r" % (job_id,))
    inputs = {k: v for k, v in (("prompt", prompt), ("messages", messages),
                                ("prompt_tokens", prompt_tokens)) if v is not None}
    if len(inputs) != 1:
        raise ValueError("give exactly one of prompt, messages, prompt_tokens")
    unknown = sorted(set(params) - set(SUBMIT_DEFAULTS))
    if unknown:
        raise TypeError("unknown submit parameter(s): %s" % ", ".join(unknown))
    m = {"op": "submit", "id": job_id}
    for k, v in inputs.items():
        m[k] = list(v) if isinstance(v, tuple) else v
    for k, v in params.items():
        if v is None:
            continue
        if k == "stop" and isinstance(v, str):
            v = [v]
        elif isinstance(v, tuple):
            v = list(v)
        m[k] = v
    return m


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data):
    return msgpack.unpackb(data, raw=False, strict_map_key=True)


def check_reply(reply, job_id=None):
    """Returns an ok reply; raises ConveyorError for an error reply or a malformed one."""
    if not isinstance(reply, dict) or "ok" not in reply:
        raise ConveyorError("internal", "malformed reply from the server: %r" % (reply,), id=job_id)
    if reply["ok"] is True:
        return reply
    err = reply.get("error") or {}
    raise ConveyorError(err.get("code", "internal"), err.get("message", ""), err.get("field"),
                        reply.get("id", job_id))


def raise_for_event(event):
    """Raises ConveyorError for an error event; returns other events unchanged."""
    if event.get("kind") == "error":
        raise ConveyorError(event.get("code", "internal"), event.get("message", ""),
                            id=event.get("id"))
    return event
