"""CURVE: key loading (no server needed), and against the real `conveyor serve --curve-secret-key
--authorized-keys` (CONVEYOR_BIN): a producer whose key is authorized submits and streams its
events; one with an unknown key, or none, gets no reply and no event."""
import json
import os
import subprocess
import sys
import time

import pytest
import zmq

from conveyor_client import Client, ConveyorTimeout, load_curve_keys
from conveyor_client.pipe import parse_args

CONVEYOR_BIN = os.environ.get("CONVEYOR_BIN")
needs_server = pytest.mark.skipif(not CONVEYOR_BIN, reason="CONVEYOR_BIN is not set: needs the "
                                  "conveyor binary (ctest's python_client test sets it)")


def write_pair(tmp_path, name):
    pub, sec = (k.decode() for k in zmq.curve_keypair())
    (tmp_path / (name + ".key")).write_text("public-key = %s\nsecret-key = %s\n" % (pub, sec))
    (tmp_path / (name + ".pub")).write_text(pub + "\n")
    return pub, sec


def test_load_curve_keys_reads_keygen_files(tmp_path):
    server_pub, _ = write_pair(tmp_path, "server")
    pub, sec = write_pair(tmp_path, "alice")
    keys = load_curve_keys(str(tmp_path / "server.pub"), str(tmp_path / "alice.key"))
    assert keys == {"curve_server_key": server_pub, "curve_public_key": pub, "curve_secret_key": sec}


def test_bad_key_files_and_partial_keys_are_refused(tmp_path):
    write_pair(tmp_path, "server")
    write_pair(tmp_path, "alice")
    cases = [(tmp_path / "missing.pub", tmp_path / "alice.key", "cannot read"),
             (tmp_path / "server.key", tmp_path / "alice.key", "not a public key file"),
             (tmp_path / "server.pub", tmp_path / "alice.pub", "no `secret-key"),
             (tmp_path / "short.pub", tmp_path / "alice.key", "not a 40-character Z85 key")]
    (tmp_path / "short.pub").write_text("abc\n")
    for server_file, client_file, needle in cases:
        with pytest.raises(ValueError, match=needle):
            load_curve_keys(str(server_file), str(client_file))
    with pytest.raises(ValueError, match="go together"):
        Client("tcp://127.0.0.1:1", "tcp://127.0.0.1:2", curve_server_key="x" * 40)
    with pytest.raises(SystemExit):
        parse_args(["--curve-key", str(tmp_path / "alice.key")])


def keygen(out_dir, name):
    subprocess.run([CONVEYOR_BIN, "keygen", "--out-dir", str(out_dir), "--name", name],
                   check=True, capture_output=True, timeout=30)
    return load_curve_keys(str(out_dir / "server.pub"), str(out_dir / (name + ".key")))


@pytest.fixture(scope="module")
def curve_server(tmp_path_factory):
    from test_e2e import Server  # imported here: that module skips itself without CONVEYOR_BIN

    d = tmp_path_factory.mktemp("keys")
    subprocess.run([CONVEYOR_BIN, "keygen", "--out-dir", str(d), "--name", "server"],
                   check=True, capture_output=True, timeout=30)
    alice, mallory = keygen(d, "alice"), keygen(d, "mallory")
    (d / "authorized").write_text("# producers\n" + (d / "alice.pub").read_text())

    class CurveServer(Server):
        def client(self, **kw):
            return Client(self.router, self.pub, **{**alice, **kw})

    s = CurveServer("--curve-secret-key", str(d / "server.key"), "--authorized-keys",
                    str(d / "authorized"))
    try:
        yield s, alice, mallory, d
    finally:
        s.kill()


def events_seen(sock, seconds):
    n = 0
    while sock.poll(int(seconds * 1000)):
        sock.recv_multipart()
        n += 1
    return n


def raw_sub(server, keys):
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    if keys:
        sub.curve_serverkey = keys["curve_server_key"].encode()
        sub.curve_publickey = keys["curve_public_key"].encode()
        sub.curve_secretkey = keys["curve_secret_key"].encode()
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(server.pub)
    return sub


@needs_server
def test_authorized_producer_submits_and_streams(curve_server):
    server, alice, _, _ = curve_server
    # (the start-up lines are read by a thread; the server may answer health before this one is in)
    deadline = time.monotonic() + 10
    while not any("CURVE on" in line for line in server.log) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any("CURVE on" in line for line in server.log), server.logs()
    with server.client(request_timeout=10.0) as c:
        events = list(c.stream(c.submit("The capital of France is", id="curve/ok",
                                        temperature=0, max_tokens=4), timeout=60))
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[0]["kind"] == "accepted" and events[-1]["kind"] == "done", events


@needs_server
def test_unknown_or_missing_key_can_neither_submit_nor_subscribe(curve_server):
    server, alice, mallory, _ = curve_server
    for keys in (mallory, None):
        with Client(server.router, server.pub, request_timeout=1.0, retries=0, **(keys or {})) as c:
            with pytest.raises(ConveyorTimeout):
                c.submit("hello", id="curve/refused", max_tokens=2)
    # Subscribed to everything (heartbeats included) while an authorized job runs.
    refused = [raw_sub(server, mallory), raw_sub(server, None)]
    allowed = raw_sub(server, alice)
    with server.client() as c:
        c.generate("Once upon a time", id="curve/watched", temperature=0, max_tokens=4, timeout=60)
    assert events_seen(allowed, 1.0) > 0  # the test can tell: the same socket with a key hears
    for sub in refused:
        assert events_seen(sub, 0.5) == 0
    for sub in refused + [allowed]:
        sub.close(0)


@needs_server
def test_conveyor_pipe_with_keys(curve_server):
    server, _, _, d = curve_server
    pipe = [sys.executable, "-m", "conveyor_client.pipe", "--router", server.router, "--pub",
            server.pub, "--quiet", "--request-timeout", "2"]
    job = json.dumps({"id": "curve/pipe", "prompt": "Hello", "max_tokens": 3}) + "\n"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ok = subprocess.run(pipe + ["--curve-server-key", str(d / "server.pub"), "--curve-key",
                                str(d / "alice.key")], input=job.encode(), capture_output=True,
                        timeout=120, env=env)
    assert ok.returncode == 0, ok.stderr.decode()
    assert json.loads(ok.stdout)["id"] == "curve/pipe"
    refused = subprocess.run(pipe + ["--curve-server-key", str(d / "server.pub"), "--curve-key",
                                     str(d / "mallory.key")], input=job.encode(),
                             capture_output=True, timeout=120, env=env)
    assert refused.returncode != 0
    assert "finish_reason" not in refused.stdout.decode()
