"""The HTTP door's security model (issue 26, defect 6): API keys on every /v1 route and on
/metrics (401 in OpenAI's error shape otherwise), /health open, the key file re-read on SIGHUP,
and start-up refusing (exit 2) a non-loopback HTTP bind without keys while CURVE locks ZeroMQ.
Also: a second request with the same X-Request-Id while the first still runs re-attaches."""
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

openai = pytest.importorskip("openai")

from test_e2e import CONVEYOR_BIN  # noqa: E402  (skips the module when CONVEYOR_BIN is not set)
from test_openai_http import MESSAGES, HttpServer  # noqa: E402

METRICS_LINE = re.compile(r"metrics at (http://\S+/metrics)")


def status_of(url, key=None, data=None):
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    d = tmp_path_factory.mktemp("apikeys")
    keyfile = d / "keys.txt"
    keyfile.write_text("# the pipeline's keys\nkey-from-file\n")
    s = HttpServer("--no-journal", "--api-key", "key-from-flag", "--api-key-file", str(keyfile), "--metrics-port", "0")
    try:
        deadline = time.monotonic() + 10
        s.metrics = None
        while s.metrics is None:
            for line in list(s.log):
                m = METRICS_LINE.search(line)
                if m:
                    s.metrics = m.group(1)
            assert s.metrics or time.monotonic() < deadline, s.logs()
            time.sleep(0.05)
        yield s, keyfile
    finally:
        s.kill()


def test_v1_routes_need_a_key_and_health_does_not(keyed):
    s, _ = keyed
    status, body = status_of(s.base + "/v1/models")
    assert status == 401
    err = __import__("json").loads(body)["error"]
    assert err["code"] == "missing_api_key" and "Authorization" in err["message"]
    status, body = status_of(s.base + "/v1/models", key="wrong")
    assert status == 401 and b"invalid_api_key" in body
    status, _ = status_of(s.base + "/v1/completions", key="wrong-too", data=b'{"prompt": "x", "max_tokens": 1}')
    assert status == 401
    assert status_of(s.base + "/v1/models", key="key-from-flag")[0] == 200
    assert status_of(s.base + "/v1/models", key="key-from-file")[0] == 200
    assert status_of(s.base + "/health")[0] == 200
    # vLLM leaves /tokenize and /detokenize open under --api-key; here they need a key too.
    for path in ("/tokenize", "/detokenize"):
        body = b'{"prompt": "x"}' if path == "/tokenize" else b'{"tokens": [1]}'
        assert status_of(s.base + path, data=body)[0] == 401
        assert status_of(s.base + path, key="key-from-file", data=body)[0] == 200


def test_the_openai_package_with_a_key(keyed):
    s, _ = keyed
    good = openai.OpenAI(base_url=s.base + "/v1", api_key="key-from-flag", max_retries=0)
    r = good.chat.completions.create(model=s.model, messages=MESSAGES, max_tokens=3)
    assert r.choices[0].message.content is not None
    bad = openai.OpenAI(base_url=s.base + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=s.model, messages=MESSAGES, max_tokens=3)


def test_metrics_take_the_same_keys(keyed):
    s, _ = keyed
    assert status_of(s.metrics)[0] == 401
    status, body = status_of(s.metrics, key="key-from-file")
    assert status == 200 and b"conveyor_" in body


def test_sighup_rereads_the_key_file(keyed):
    s, keyfile = keyed
    keyfile.write_text("rotated-key\n")
    s.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while status_of(s.base + "/v1/models", key="rotated-key")[0] != 200:
        assert time.monotonic() < deadline, s.logs()
        time.sleep(0.05)
    assert status_of(s.base + "/v1/models", key="key-from-file")[0] == 401
    assert status_of(s.base + "/v1/models", key="key-from-flag")[0] == 200  # flags' keys stay
    # A file that cannot be taken leaves the keys in force.
    keyfile.write_text("\n")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert status_of(s.base + "/v1/models", key="rotated-key")[0] == 200
    assert any("SIGHUP" in line and "holds no key" in line for line in s.log), s.logs()
    keyfile.write_text("key-from-file\n")
    s.proc.send_signal(signal.SIGHUP)


def serve_once(*args):
    """Runs `conveyor serve` expecting it to stop at start-up: (exit code, output)."""
    p = subprocess.run([CONVEYOR_BIN, "serve", "--device", "null", "--no-journal", "--router", "tcp://127.0.0.1:*",
                        "--pub", "tcp://127.0.0.1:*", "--pull", "tcp://127.0.0.1:*", *args],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def test_open_http_beside_curve_is_refused(tmp_path):
    subprocess.run([CONVEYOR_BIN, "keygen", "--out-dir", str(tmp_path), "--name", "server"],
                   check=True, capture_output=True, timeout=30)
    curve = ["--curve-secret-key", str(tmp_path / "server.key"), "--authorized-keys", str(tmp_path / "server.pub")]
    code, out = serve_once("--http-port", "0", "--http-host", "0.0.0.0", *curve)
    assert code == 2, out
    assert "--api-key" in out and "--allow-unauthenticated-http" in out, out
    code, out = serve_once("--api-key-file", str(tmp_path / "missing.txt"))
    assert code == 2 and "missing.txt" in out, out
    code, out = serve_once("--api-key", "has space")
    assert code == 2 and "--api-key" in out, out


def test_open_non_loopback_binds_are_warned_about():
    s = HttpServer("--no-journal", "--http-host", "0.0.0.0")
    try:
        assert any("without API keys" in line for line in s.log), s.logs()
    finally:
        s.kill()


def test_a_second_request_with_a_running_id_reattaches():
    """The same X-Request-Id while the first request still runs: both get the one job's answer
    (409 is for ids past retention). With the journal on, as a production server runs."""
    s = HttpServer()
    try:
        body = {"messages": MESSAGES, "max_tokens": 40, "temperature": 1.0, "ignore_eos": True}
        first = {}
        t = threading.Thread(target=lambda: first.update(r=s.post("/v1/chat/completions", body, {"X-Request-Id": "twice"})))
        t.start()
        time.sleep(0.3)  # the first job runs
        second = s.post("/v1/chat/completions", body, {"X-Request-Id": "twice"})
        t.join(120)
        assert first["r"][0] == 200, first
        assert second[0] == 200, second
        assert first["r"][1]["choices"] == second[1]["choices"]
        # streamed while it runs, too
        client = s.openai()
        gen = client.chat.completions.create(model=s.model, messages=MESSAGES, max_tokens=40, stream=True,
                                             extra_body={"ignore_eos": True}, extra_headers={"X-Request-Id": "twice-s"})
        it = iter(gen)
        head = next(it)
        again = client.chat.completions.create(model=s.model, messages=MESSAGES, max_tokens=40, stream=True,
                                               extra_body={"ignore_eos": True}, extra_headers={"X-Request-Id": "twice-s"})
        a = "".join(c.choices[0].delta.content or "" for c in [head, *it] if c.choices)
        b = "".join(c.choices[0].delta.content or "" for c in again if c.choices)
        assert a == b and a
    finally:
        s.kill()
