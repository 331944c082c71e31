"""The ``vllm_mode = "server"`` client without vLLM: what a run says when the server is missing or cannot take
weights (one line naming the config key, after ``vllm_server_timeout``), how pushed weights are cut
into files, and how each answer is handed over as it arrives (tests/core/completions_server.py). The real server is exercised in ``tests/vllm_lane/test_server.py``."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from grpo_core.config import GenerationConfig
from grpo_core.generation.vllm.server import ServerEngine, _chunks
from tests.core.completions_server import FakeCompletions, expected_token_ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(**fields: Any) -> Any:
    return SimpleNamespace(generation=GenerationConfig(backend="vllm", vllm_mode="server", **fields))


def test_no_server_is_one_line_after_the_timeout() -> None:
    port = free_port()  # closed again: nothing listens there
    start = time.monotonic()
    with pytest.raises(ValueError) as info:
        ServerEngine(config(vllm_server_port=port, vllm_server_timeout=1.5))
    elapsed = time.monotonic() - start
    assert 1.5 <= elapsed < 6
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"generation.vllm_server_host: no vLLM server answered at http://127.0.0.1:{port} "
                              "within 1.5 s (vllm_server_timeout; last: ")
    assert message.endswith(f"start one with VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --host 127.0.0.1 --port {port} "
                            "--dtype auto --worker-extension-cls grpo_core.generation.vllm.server_worker.WeightLoader "
                            "--logprobs-mode processed_logprobs --generation-config vllm")


class _PlainServe(BaseHTTPRequestHandler):
    """Answers as `vllm serve` without VLLM_SERVER_DEV_MODE: health and models, no /collective_rpc."""

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/health":
            self._send(200, {})
        elif self.path == "/v1/models":
            self._send(200, {"data": [{"id": "tiny", "object": "model"}]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(404, {"detail": "Not Found"})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def plain_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PlainServe)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_server_without_dev_mode_is_one_line(plain_server: int) -> None:
    url = f"http://127.0.0.1:{plain_server}"
    with pytest.raises(ValueError) as info:
        ServerEngine(config(vllm_server_url=url, vllm_server_timeout=5))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"generation.vllm_server_url: the server at {url} takes no weights (no /collective_rpc: "
                              "it runs without VLLM_SERVER_DEV_MODE=1); start it with VLLM_SERVER_DEV_MODE=1 vllm "
                              f"serve tiny --host 127.0.0.1 --port {plain_server} --dtype auto ")


def test_pushes_keep_blocks_whole() -> None:
    def t(n: int) -> torch.Tensor:
        return torch.zeros(n)  # 4 bytes per element

    blocks = [[("a.q", t(10)), ("a.k", t(10))], [("b.x", t(35))], [("c.y", t(5))], [("d.z", t(100))]]
    chunks = [[name for name, _ in chunk] for chunk in _chunks(blocks, limit=200)]
    assert chunks == [["a.q", "a.k"], ["b.x", "c.y"], ["d.z"]]  # 80 B; 140 + 20 B; 400 B alone


def test_a_server_that_stops_answering_mid_run_is_one_line_and_exit_1(monkeypatch, capsys) -> None:
    import argparse

    from grpo_core.generation.vllm.server import ServerError
    from grpo_rewards import command_line as cli

    engine = object.__new__(ServerEngine)  # as after a good start: the server then went away
    engine.url, engine.model = f"http://127.0.0.1:{free_port()}", "m"
    with pytest.raises(ServerError) as info:
        engine.generate([[1, 2]], [{"max_tokens": 2}])

    def train(args: argparse.Namespace) -> int:
        raise info.value

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=train)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: /v1/completions: no answer from the vLLM server at http://127.0.0.1:")
    assert err.count("\n") == 1 and "a bug" not in err


@pytest.fixture
def completions_server() -> Iterator[FakeCompletions]:
    with FakeCompletions() as server:
        yield server


def test_each_answer_is_handed_over_while_other_requests_are_out(completions_server: FakeCompletions) -> None:
    """The first prompt's request is held until the others were handed over: they come first, each with its own
    index, and the held one is handed over last, after it was released."""
    completions_server.held.append([1, 1])
    engine = completions_server.engine()
    assert engine.hands_over
    prompts = [[1, 1], [2, 5], [3, 3], [4]]
    handed: list[tuple[int, list[Any]]] = []

    def on_finished(i: int, completions: list[Any]) -> None:
        assert threading.current_thread() is threading.main_thread()
        handed.append((i, completions))
        if len(handed) == 3:
            completions_server.release.set()

    start = time.monotonic()
    results = engine.generate(prompts, [{"n": 2, "max_tokens": 3}] * 4, on_finished=on_finished)
    assert time.monotonic() - start < 5  # released by the hand-over, not by the server's 10 s limit
    assert sorted(i for i, _ in handed[:3]) == [1, 2, 3] and handed[3][0] == 0
    assert [results[i] for i, _ in handed] == [c for _, c in handed]
    for prompt, completions in zip(prompts, results, strict=True):
        assert [c.token_ids for c in completions] == [expected_token_ids(prompt, j) for j in range(2)]  # in order
        assert completions[1].logprobs == pytest.approx([-0.2, -0.3, -0.4])
    assert engine.generate(prompts, [{"n": 2, "max_tokens": 3}] * 4) == results  # without hand-over: the same


def test_a_failing_hand_over_is_raised_without_waiting_for_the_other_requests(
        completions_server: FakeCompletions) -> None:
    completions_server.held.append([7])
    engine = completions_server.engine()

    def on_finished(i: int, completions: list[Any]) -> None:
        raise RuntimeError(f"scoring failed at {i}")

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="scoring failed at 1"):
        engine.generate([[7], [8]], [{"n": 1, "max_tokens": 3}] * 2, on_finished=on_finished)
    assert time.monotonic() - start < 5  # the held request is still out (10 s): not waited for


def test_an_answer_with_too_few_completions_is_refused_before_it_is_handed_over(
        completions_server: FakeCompletions) -> None:
    from grpo_core.generation.vllm.server import ServerError

    completions_server.short.append([9])
    handed: list[int] = []
    with pytest.raises(ServerError, match=r"returned 2 completions for a request of n=3"):
        completions_server.engine().generate([[9]], [{"n": 3, "max_tokens": 3}],
                                             on_finished=lambda i, c: handed.append(i))
    assert handed == []
