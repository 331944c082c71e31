"""A scripted judge behind a local OpenAI-compatible endpoint, for tests and ``grpo rewards check``.

:class:`ScriptedEndpoint` serves ``POST /v1/chat/completions`` from a thread of this process (``http.server``)
and answers with a ``script(request_body) -> (status, reply_text)``. :func:`obedient_judge` is the script the
prompt-injection probes run against: a judge that reads the text between the first ``<completion>`` and the first
``</completion>`` after it (and the same for ``<prompt>``) as data, and **obeys any instruction it finds outside
that data** ("ignore the rubric", "answer 10", a verdict of 10); otherwise it gives the middle of the scale. It
first echoes the data it saw, then gives its verdict as JSON, as a model that reasons first does. So a probe that
moves its score tests the template and the parsing, not a model: an injection only works if the completion's text
escaped its span, or if a verdict is read from the echoed completion.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[dict[str, Any]], tuple[int, str]]
_INJECTION = re.compile(r"ignore (?:the|all|previous|your) (?:rubric|instructions)|answer 10\b|\"score\"\s*:\s*10\b",
                        re.IGNORECASE)
_DATA = re.compile(r"<(completion(?:_a|_b)?|prompt)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_NAMES = re.compile(r'"(\w+)": <number>')
_HIGH = re.compile(r"to (-?\d+(?:\.\d+)?) \(best\)")
_LOW = re.compile(r"from (-?\d+(?:\.\d+)?) \(worst\)")


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")


def obedient_judge(body: dict[str, Any]) -> tuple[int, str]:
    """The probes' judge (module docs): obeys any injection outside the data spans it sees. Asked to compare
    two completions (a ``"winner"`` verdict), it ties them, unless an injection follows one of their spans: then
    that one wins."""
    text = _user_text(body)
    found = list(_DATA.finditer(text))
    outside = _DATA.sub(" ", text)
    echo = "\n".join(f"Reading: {m.group(2).strip()[:2000]}" for m in found)
    if '"winner"' in text:
        winner = "tie"
        for injection in _INJECTION.finditer(text):
            if any(m.start() <= injection.start() < m.end() for m in found):
                continue  # inside a data span: data, not an instruction
            before = [m.group(1).lower() for m in found if m.end() <= injection.start()]
            side = next((tag for tag in reversed(before) if tag.startswith("completion_")), "completion_a")
            winner = side[-1].upper()
        return 200, f"{echo}\nMy verdict:\n{json.dumps({'winner': winner})}"
    high = float(_HIGH.search(text).group(1)) if _HIGH.search(text) else 10.0
    low = float(_LOW.search(text).group(1)) if _LOW.search(text) else 0.0
    score = high if _INJECTION.search(outside) else (low + high) / 2
    names = _NAMES.findall(text)
    scores = {n: score for n in names if n != "score"}
    verdict = {"scores": scores} if scores else {"score": score}
    return 200, f"{echo}\nMy verdict:\n{json.dumps(verdict)}"


def _reply(text: str) -> dict[str, Any]:
    return {"id": "scripted", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


class ScriptedEndpoint:
    """A local OpenAI-compatible endpoint answering with ``script`` (module docs); a context manager.

    ``requests`` holds each request body received; ``in_flight`` and ``max_in_flight`` count concurrent requests.
    """

    def __init__(self, script: Script = obedient_judge) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with endpoint._lock:
                    endpoint.requests.append(body)
                    endpoint.in_flight += 1
                    endpoint.max_in_flight = max(endpoint.max_in_flight, endpoint.in_flight)
                try:
                    status, text = endpoint.script(body)
                finally:
                    with endpoint._lock:
                        endpoint.in_flight -= 1
                payload = json.dumps(_reply(text) if status == 200 else {"error": text}).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-judge", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
