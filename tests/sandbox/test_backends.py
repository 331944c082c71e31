"""Remote clients (SandboxFusion, Piston) against our own HTTP server on loopback; retries and errors."""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grpo_rewards.sandbox.backends.piston import PistonBackend
from grpo_rewards.sandbox.backends.sandboxfusion import SandboxFusionBackend
from grpo_rewards.sandbox.program import Limits, Program
from grpo_rewards.sandbox.server import serve

from .conftest import needs_default

pytestmark = needs_default

LIMITS = Limits(cpu_seconds=1.0, wall_seconds=2.0, memory_mb=512)
PROGRAMS = [
    (Program("print(input()[::-1])", stdin="abc\n"), "ok", "cba\n"),
    (Program("raise SystemExit(4)"), "runtime_error", ""),
    (Program("import time\ntime.sleep(60)"), "timeout", ""),
    (Program("x = bytearray(4 << 30)"), "memory", ""),
    (Program("import sys\nsys.stdout.write('z' * (2 << 20))"), "output_limit", None),
]


@pytest.fixture(scope="module")
def server(box):
    srv = serve(box, "127.0.0.1", 0, limits=LIMITS)
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("client_cls", [SandboxFusionBackend, PistonBackend])
def test_client_against_our_server(server, client_cls):
    with client_cls(server, limits=LIMITS, concurrency=4) as client:
        results = client.run([p for p, _, _ in PROGRAMS])
        for (_, status, stdout), r in zip(PROGRAMS, results, strict=True):
            assert r.status == status, (client_cls.name, status, r)
            if stdout is not None:
                assert r.stdout == stdout
        m = client.metrics()
        assert m["runs"] == len(PROGRAMS) and m["sandbox_error_rate"] == 0.0


def test_server_caps_requested_limits(server):
    body = json.dumps({"code": "import time\ntime.sleep(30)\nprint('late')", "language": "python",
                       "run_timeout": 1000}).encode()
    req = urllib.request.Request(server + "/run_code", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        reply = json.loads(resp.read())
    assert reply["status"] == "Failed" and reply["run_result"]["status"] == "TimeLimitExceeded"
    assert reply["run_result"]["execution_time"] < LIMITS.wall_seconds + 1


def test_ping_and_bad_requests(server):
    with urllib.request.urlopen(server + "/v1/ping", timeout=5) as resp:
        assert json.loads(resp.read()) == "pong"
    with SandboxFusionBackend(server, retries=0) as client:
        from grpo_rewards.sandbox.backends.http import RemoteError

        with pytest.raises(RemoteError, match="HTTP 400"):
            client.post_json("/run_code", {"code": 5}, timeout=5)


class _Flaky(BaseHTTPRequestHandler):
    """Fails with 503 (or drops the connection) the first times, then answers like SandboxFusion."""

    failures = 2
    calls = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        with _Flaky.lock:
            _Flaky.calls += 1
            fail = _Flaky.calls <= _Flaky.failures
        if fail:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"status": "Success", "run_result": {"status": "Finished", "return_code": 0,
                                                               "stdout": "hi\n", "stderr": "", "execution_time": 0.1}})
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


@pytest.fixture
def flaky():
    _Flaky.calls = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_retries_transient_errors(flaky):
    with SandboxFusionBackend(f"http://127.0.0.1:{flaky.server_address[1]}", retries=3, backoff=0.01) as client:
        r = client.run_one(Program("print('hi')"))
    assert (r.status, r.stdout) == ("ok", "hi\n")
    assert _Flaky.calls == 3 and client.metrics()["retries"] == 2


def test_gives_up_as_sandbox_error(flaky):
    _Flaky.failures = 100
    try:
        with SandboxFusionBackend(f"http://127.0.0.1:{flaky.server_address[1]}", retries=1, backoff=0.01) as client:
            r = client.run_one(Program("print('hi')"))
    finally:
        _Flaky.failures = 2
    assert r.status == "sandbox_error" and "503" in r.error and "2 attempts" in r.error


def test_unreachable_server_is_a_sandbox_error():
    with PistonBackend("http://127.0.0.1:9", retries=1, backoff=0.01) as client:
        r = client.run_one(Program("print(1)"))
    assert r.status == "sandbox_error"


def test_bearer_token(box):
    srv = serve(box, "127.0.0.1", 0, limits=LIMITS, token="s3cret")
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        with SandboxFusionBackend(url, retries=0) as anonymous:
            assert anonymous.run_one(Program("print(1)")).status == "sandbox_error"
        with SandboxFusionBackend(url, retries=0, api_key="s3cret") as client:
            assert client.run_one(Program("print(1)")).stdout == "1\n"
    finally:
        srv.shutdown()
        srv.server_close()


def test_code_reward_through_a_remote_backend(server):
    from grpo_rewards import reward

    r = reward("code_execution", backend="sandboxfusion", url=server, cpu_seconds=1.0, wall_seconds=2.0)
    scores = r(["```python\nprint(int(input()) * 2)\n```", "```python\nprint(0)\n```"],
               verification_info=[{"inputs": ["4\n"], "outputs": ["8\n"]}] * 2)
    assert scores == [1.0, 0.0]


def test_several_servers_round_robin_and_fail_over(box):
    """Two servers share the load; with one of them down, retries move on to the other."""
    a, b = serve(box, "127.0.0.1", 0, limits=LIMITS), serve(box, "127.0.0.1", 0, limits=LIMITS)
    urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in (a, b)]
    seen = []
    for srv in (a, b):
        handler = srv.RequestHandlerClass
        srv.RequestHandlerClass = type("Counting", (handler,), {
            "do_POST": lambda self, _h=handler, _p=srv.server_address[1]: (seen.append(_p), _h.do_POST(self))})
    try:
        with SandboxFusionBackend(",".join(urls), retries=1, backoff=0.01) as client:
            results = client.run([Program("print(7)")] * 6)
            assert all(r.stdout == "7\n" for r in results)
            assert {p for p in seen} == {a.server_address[1], b.server_address[1]}
        with SandboxFusionBackend(f"http://127.0.0.1:9,{urls[0]}", retries=1, backoff=0.01) as client:
            assert all(r.stdout == "7\n" for r in client.run([Program("print(7)")] * 4))
    finally:
        for srv in (a, b):
            srv.shutdown()
            srv.server_close()
