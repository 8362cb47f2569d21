"""A nats-server with JetStream for tests: a temporary store directory, a free loopback port,
stopped (or killed) by the test. setup.sh installs nats-server (Debian's package)."""
import os
import shutil
import socket
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class NatsServer:
    def __init__(self, port=None, store=None):
        exe = shutil.which("nats-server") or "/usr/sbin/nats-server"
        if not os.access(exe, os.X_OK):
            raise RuntimeError("nats-server is not installed: run ./setup.sh (Debian package nats-server)")
        self.exe = exe
        self.port = port or free_port()
        self.store = store or tempfile.mkdtemp(prefix="conveyor-test-nats-")
        self.url = "nats://127.0.0.1:%d" % self.port
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([self.exe, "-js", "-sd", self.store, "-a", "127.0.0.1",
                                      "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError("nats-server did not start on port %d" % self.port)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def close(self):
        self.stop()
        shutil.rmtree(self.store, ignore_errors=True)
