"""OpenAI's Batch file format for conveyor-pipe (--format openai-batch).

Input lines:  {"custom_id": S, "method": "POST", "url": "/v1/chat/completions" | "/v1/completions",
               "body": {... the request body ...}}
Output lines: {"id": "batch_req_<job id>", "custom_id": S,
               "response": {"status_code": I, "request_id": <job id>, "body": {...}} | null,
               "error": null | {"code": S, "message": S}}
A request the server refused (or a body conveyor cannot run) has a response with its HTTP status
and OpenAI's error object as the body; `error` is for failures that are not HTTP answers (a
timeout, a server that went away). The body is read by the same rules as the server's HTTP
intake (docs/http.md); `echo` is not available here (use the HTTP API for it). A line with
logprobs runs as a streamed job with `token_bytes` (its tokens events carry each token's bytes),
so the output has OpenAI's logprobs, token strings included, without the model's tokenizer here.
A line with n > 1 runs as n jobs (conveyor-pipe groups them: choice 0 first, the rest once it is
done, one output line with every choice).
"""
import json
import time

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
COMMON = {"model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "seed",
          "presence_penalty", "frequency_penalty", "logit_bias", "user", "response_format", "logprobs",
          "top_k", "min_p", "repetition_penalty", "min_tokens", "ignore_eos", "stop_token_ids", "priority", "deadline_ms"}
CHAT_ONLY = {"messages", "max_completion_tokens", "top_logprobs", "chat_template_kwargs", "tools", "tool_choice", "functions",
             "function_call", "parallel_tool_calls", "store", "metadata", "service_tier"}
COMPLETION_ONLY = {"prompt", "echo", "suffix", "best_of"}
PASSED_ON = ("temperature", "top_p", "seed", "top_k", "min_p", "min_tokens", "ignore_eos", "stop_token_ids",
             "priority", "deadline_ms", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
             "chat_template_kwargs")
STATUS = {"bad_request": 400, "too_long": 400, "not_found": 404, "duplicate": 409, "overloaded": 429,
          "shutting_down": 503, "internal": 500}


MAX_CHOICES = 16   # n, as the HTTP intake allows


def num_choices(body):
    """The line's `n` (choices, each its own job), in [1, MAX_CHOICES]."""
    n = body.get("n")
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise LineError("n must be an integer in [1, %d]" % MAX_CHOICES, "n")
    return n


def choice_job(job, index, job_id):
    """Choice `index` of a line's job: its own id and, when the line gave a seed, seed + index
    (as the HTTP API's choice i); without one the server picks each choice's."""
    j = dict(job, id=job_id)
    if j.get("seed") is not None:
        j["seed"] = j["seed"] + index
    return j


class LineError(Exception):
    """A line that cannot run: its HTTP status, message and the offending field."""

    def __init__(self, message, param=None, status=400):
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


def _refuse_unsupported(body):
    for k in ("tools", "functions"):
        if body.get(k):
            raise LineError("%s (tool calls) is not available in a batch: the server renders tools with the model's "
                            "template for HTTP requests only (POST /v1/chat/completions); in a batch use response_format" % k, k)
    if body.get("tool_choice") not in (None, "none", "auto") or body.get("function_call"):
        k = "function_call" if body.get("function_call") else "tool_choice"
        raise LineError("%s asks for tool calls, which are not available in a batch (HTTP requests only)" % k, k)
    if body.get("best_of", 1) != 1:
        raise LineError("best_of must be 1", "best_of")
    if body.get("echo") or body.get("suffix"):
        raise LineError("echo and suffix are not supported by conveyor", "echo" if body.get("echo") else "suffix")
    if body.get("stream"):
        raise LineError("stream is not available in a batch", "stream")


def _content(message, i):
    c = message.get("content")
    if isinstance(c, str):
        return c
    if not isinstance(c, list):
        raise LineError("messages[%d].content must be a string or a list of text parts" % i, "messages[%d].content" % i)
    for k, p in enumerate(c):
        if not (isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)):
            name = "messages[%d].content[%d]" % (i, k)
            raise LineError(name + ' must be {"type":"text","text":...}: conveyor\'s models read text only', name)
    return "".join(p["text"] for p in c)


def _response_format(rf):
    if rf is None:
        return None
    if not isinstance(rf, dict):
        raise LineError("response_format must be an object with a type", "response_format")
    t = rf.get("type")
    if t == "text":
        return None
    if t == "json_object":
        return {"type": "json_object"}
    if t == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict):
            raise LineError("response_format.json_schema must be an object with a schema", "response_format.json_schema")
        schema = js.get("schema")
        if not isinstance(schema, (dict, bool)):
            raise LineError("response_format.json_schema.schema must be a JSON schema", "response_format.json_schema.schema")
        # Written as the HTTP intake writes it (compact, UTF-8): the grammar text is the same.
        return {"type": "json_schema", "schema": json.dumps(schema, separators=(",", ":"), ensure_ascii=False)}
    if t == "regex":
        return {"type": "regex", "pattern": rf.get("pattern")}
    if t == "grammar":
        return {"type": "grammar", "grammar": rf.get("grammar")}
    raise LineError("response_format.type must be text, json_object, json_schema, regex or grammar", "response_format.type")


def to_submit(line):
    """(custom_id, url, model, submit map without "id") for one parsed input line; raises
    LineError for a line conveyor cannot run (custom_id is then LineError.custom_id)."""
    if not isinstance(line, dict):
        raise LineError("a batch line must be a JSON object {custom_id, method, url, body}")
    custom_id, url, body = line.get("custom_id"), line.get("url"), line.get("body")
    if not isinstance(custom_id, str) or not custom_id:
        raise LineError("custom_id is required (a non-empty string)", "custom_id")
    if line.get("method", "POST") != "POST":
        raise LineError("method must be POST", "method")
    if url not in (CHAT, COMPLETIONS):
        raise LineError("url must be %s or %s, not %r" % (CHAT, COMPLETIONS, url), "url")
    if not isinstance(body, dict):
        raise LineError("body must be a JSON object (the request body)", "body")
    chat = url == CHAT
    allowed = COMMON | (CHAT_ONLY if chat else COMPLETION_ONLY)
    for k in body:
        if k not in allowed:
            raise LineError("unknown field '%s' for %s" % (k, url), k)
    _refuse_unsupported(body)
    num_choices(body)
    job = {}
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise LineError("messages must be a non-empty array of {role, content}", "messages")
        job["messages"] = []
        for i, m in enumerate(msgs):
            if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user", "assistant"):
                raise LineError("messages[%d].role must be system, developer, user or assistant" % i, "messages[%d].role" % i)
            role = "system" if m["role"] == "developer" else m["role"]
            job["messages"].append({"role": role, "content": _content(m, i)})
    else:
        p = body.get("prompt")
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
            p = p[0]
        if isinstance(p, str) and p:
            job["prompt"] = p
        elif isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
            job["prompt_tokens"] = p
        else:
            raise LineError("prompt must be a non-empty string or array of token ids (one prompt per line)", "prompt")
    # OpenAI's defaults: 16 tokens for completions; a chat runs to EOS (the server's max_model_len).
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) if chat else body.get("max_tokens", 16)
    job["max_tokens"] = 2 ** 31 - 1 if max_tokens is None else max_tokens
    for k in PASSED_ON:
        if body.get(k) is not None:
            job[k] = body[k]
    if job.get("top_k") == -1:  # vLLM's "off", as the HTTP intake reads it
        del job["top_k"]
    stop = body.get("stop")
    if stop is not None:
        job["stop"] = [stop] if isinstance(stop, str) else stop
    rf = _response_format(body.get("response_format"))
    if rf is not None:
        job["response_format"] = rf
    top = _logprobs(body, chat)
    if top is not None:  # streamed: the tokens events carry the logprobs and the tokens' bytes
        job.update(logprobs=True, top_logprobs=top, token_bytes=True, stream=True)
    return custom_id, url, body.get("model"), job


def _logprobs(body, chat):
    """The alternatives a line asks for with its logprobs (0..20), or None without logprobs:
    chat's logprobs (bool) and top_logprobs, completions' logprobs (an int)."""
    def count(name):
        v = body.get(name, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 20:
            raise LineError("%s must be an integer in [0, 20]" % name, name)
        return v
    if chat:
        if body.get("logprobs") not in (None, True, False):
            raise LineError("logprobs must be true or false", "logprobs")
        top = count("top_logprobs") if body.get("top_logprobs") is not None else 0
        if top > 0 and not body.get("logprobs"):
            raise LineError("top_logprobs needs logprobs: true", "top_logprobs")
        return top if body.get("logprobs") else None
    return count("logprobs") if body.get("logprobs") is not None else None


def _choice_logprobs(url, top, events):
    """OpenAI's logprobs of one choice from its tokens events (token_bytes), as the HTTP API
    writes them: chat {"content": [...]}, completions {tokens, token_logprobs, top_logprobs,
    text_offset}."""
    content, tokens, lps, tops, offsets, offset = [], [], [], [], [], 0
    for e in events:
        alt_ids = e.get("top_logprobs") or [[] for _ in e["token_ids"]]
        alt_bytes = e.get("top_logprobs_bytes") or [[] for _ in e["token_ids"]]
        for b, lp, alts, alts_b in zip(e["token_bytes"], e["logprobs"], alt_ids, alt_bytes):
            s = b.decode("utf-8", "replace")
            named = [(ab.decode("utf-8", "replace"), ab, a[1]) for a, ab in zip(alts, alts_b)]
            content.append({"token": s, "logprob": lp, "bytes": list(b),
                            "top_logprobs": [{"token": t, "logprob": l, "bytes": list(tb)} for t, tb, l in named]})
            tokens.append(s)
            lps.append(lp)
            tops.append({t: l for t, _, l in named} if top > 0 else None)
            offsets.append(offset)
            offset += len(b)
    if url == CHAT:
        return {"content": content}
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}


def output_line(custom_id, url, model, job_id, event, top=None, tokens=None):
    """The output line for a job that ended with `event` (done or error; an error without seq is
    the client's own failure: a timeout), or for a line of n choices that all ended with the done
    events `event` (a list, in choice order): the prompt counted once, every completion. With
    logprobs (`top` alternatives), `tokens` holds each choice's tokens events."""
    out = {"id": "batch_req_%s" % job_id, "custom_id": custom_id, "response": None, "error": None}
    dones = event if isinstance(event, list) else [event]
    if dones[0].get("kind") == "done":
        usage = dones[0].get("usage") or {}
        prompt = usage.get("prompt_tokens", 0)
        completion = sum((d.get("usage") or {}).get("completion_tokens", 0) for d in dones)
        choices = []
        for i, d in enumerate(dones):
            choice = {"index": i, "finish_reason": d.get("finish_reason"), "logprobs": None}
            if top is not None and tokens is not None:
                choice["logprobs"] = _choice_logprobs(url, top, tokens[i])
            if url == CHAT:
                choice["message"] = {"role": "assistant", "content": d.get("text")}
            else:
                choice["text"] = d.get("text")
            choices.append(choice)
        body = {"id": ("chatcmpl-" if url == CHAT else "cmpl-") + job_id,
                "object": "chat.completion" if url == CHAT else "text_completion",
                "created": int(time.time()), "model": model, "choices": choices,
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion,
                          "prompt_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)}}}
        out["response"] = {"status_code": 200, "request_id": job_id, "body": body}
        return out
    code, message = event.get("code", "internal"), event.get("message", "")
    if event.get("seq") is None and code == "timeout":
        out["error"] = {"code": code, "message": message}
        return out
    out["response"] = {"status_code": STATUS.get(code, 500), "request_id": job_id,
                       "body": {"error": {"message": message, "type": "invalid_request_error" if STATUS.get(code) == 400
                                          else "server_error", "param": event.get("field"), "code": code}}}
    return out


def refused_line(custom_id, err):
    """The output line of a line that could not run (LineError)."""
    return {"id": "batch_req_invalid", "custom_id": custom_id, "error": None,
            "response": {"status_code": err.status, "request_id": None,
                         "body": {"error": {"message": err.message, "type": "invalid_request_error",
                                            "param": err.param, "code": "bad_request"}}}}
