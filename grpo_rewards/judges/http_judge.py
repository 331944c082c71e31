"""A judge behind an OpenAI-compatible endpoint (a vLLM server, any hosted API): :class:`OpenAIJudge`.

``complete(messages, sampling)`` posts one chat completion to ``<base_url>/chat/completions`` with the standard
library's ``urllib`` and returns the reply's text. Each request has a ``timeout``; a request that times out, cannot
connect, or gets a 429 or 5xx answer is retried up to ``retries`` times, waiting ``backoff * 2**k`` seconds
before retry ``k`` (other 4xx answers are not retried: the request is wrong). :meth:`OpenAIJudge.worst_case` is the
longest one completion can take, which the reward's own ``timeout`` must exceed. The API key is read from the
environment variable ``api_key_env`` at each request, never stored (a judge pickles into its reward's worker
process without it). With a ``json_schema`` the request asks for structured output (``response_format``, as
vLLM and OpenAI accept it).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

RETRIED_STATUS = (408, 429, 500, 502, 503, 504)


class JudgeUnavailable(RuntimeError):
    """The endpoint gave no answer after every retry (or refused the request)."""


class OpenAIJudge:
    """A chat-completions endpoint as a judge (module docs; a module-level class: it pickles)."""

    def __init__(self, model: str, base_url: str, *, timeout: float = 30.0, retries: int = 2, backoff: float = 0.5,
                 api_key_env: str = "OPENAI_API_KEY") -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ValueError("timeout must be > 0, retries and backoff >= 0")
        self.model, self.base_url = model, base_url.rstrip("/")
        self.timeout, self.retries, self.backoff, self.api_key_env = float(timeout), int(retries), float(backoff), api_key_env
        self.requests = self.retried = 0

    def __repr__(self) -> str:
        return f"OpenAIJudge({self.model!r}, {self.base_url!r})"

    @property
    def identity(self) -> str:
        """What the cache keys a verdict on: the endpoint and the model."""
        return f"openai:{self.base_url}:{self.model}"

    def worst_case(self) -> float:
        """Seconds one completion can take at most: every try timing out, and the waits between them."""
        return self.timeout * (self.retries + 1) + sum(self.backoff * 2**k for k in range(self.retries))

    def _post(self, body: bytes) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, headers=headers,
                                         method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - an http(s) URL
            return json.loads(response.read().decode("utf-8"))

    def complete(self, messages: list[dict[str, str]], sampling: dict[str, Any],
                 json_schema: dict[str, Any] | None = None) -> str:
        payload: dict[str, Any] = {"model": self.model, "messages": messages, **sampling}
        if json_schema is not None:
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "verdict", "schema": json_schema}}
        body = json.dumps(payload).encode("utf-8")
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.retried += 1
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self.requests += 1
            try:
                reply = self._post(body)
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
                if exc.code not in RETRIED_STATUS:
                    raise JudgeUnavailable(f"{self.base_url} refused the request: {last}") from None
                continue
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            try:
                return str(reply["choices"][0]["message"]["content"] or "")
            except (KeyError, IndexError, TypeError):
                raise JudgeUnavailable(f"{self.base_url} answered without choices[0].message.content") from None
        raise JudgeUnavailable(f"{self.base_url} gave no answer in {self.retries + 1} tries (last: {last})")


def openai_backend(model: str, base_url: str | None = None, **options: Any) -> OpenAIJudge:
    """The ``openai`` judge backend: ``base_url`` is required."""
    if not base_url:
        raise ValueError("the openai judge backend needs a base_url (e.g. http://localhost:8000/v1)")
    return OpenAIJudge(model, base_url, **options)
