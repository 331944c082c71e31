"""``vllm_mode = "server"``: the engine is a ``vllm serve`` server on this machine, reached over HTTP.

:class:`ServerEngine` is the engine the ``vllm`` backend (:mod:`grpo_core.generation.vllm.engine`) drives:

* **Start-up:** waits up to ``vllm_server_timeout`` seconds for ``GET /health``, then checks the server
  can take weights (``VLLM_SERVER_DEV_MODE=1`` and the worker extension of
  :mod:`grpo_core.generation.vllm.server_worker`) and returns its log-probs after temperature
  (``--logprobs-mode processed_logprobs``); each missing piece is a one-line ``ValueError`` naming the
  config key, saying how to start the server (:func:`serve_command`). A server in another dtype than the
  policy's forwards is a warning (its log-probs drift from the policy's).
* **Generation:** one ``POST /v1/completions`` per request, sent concurrently: prompt token ids in, the
  ``SamplingParams`` fields the backend built (``n``, ``seed``, ``stop_token_ids``, ``logprobs = 0``, ...),
  and ``return_tokens_as_token_ids`` so each sampled token comes back as its id with its log-prob. Each
  prompt's answer is passed on as it arrives (``generate(..., on_finished=...)``), so the trainer scores the
  groups that finished first while the server still generates the others.
* **Weights:** the changed tensors are written as safetensors files to a folder in shared memory
  (``/dev/shm`` where there is one), whole blocks per file, at most :data:`PUSH_BYTES` each; each file is
  loaded by ``POST /collective_rpc`` calling the worker's ``grpo_load_weights`` (vLLM's in-place
  ``reload_weights``, the one the colocated engine uses), then deleted. After a push the prefix cache is
  reset (``POST /reset_prefix_cache``). The server must therefore run on the same machine (its GPUs may be
  others than the trainer's).

No vLLM import here: the training process needs only the standard library, torch and safetensors.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import warnings
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import torch

from grpo_core.generation.vllm.completion import Completion
from grpo_core.generation.vllm.support import server_url
from grpo_core.generation.vllm.weights import block
from grpo_rewards.errors import ServiceError

if TYPE_CHECKING:
    from grpo_core.config import RunConfig

PUSH_BYTES = 1 << 30  # the largest file one push writes (whole blocks; a larger block goes alone)
EXTENSION = "grpo_core.generation.vllm.server_worker.WeightLoader"
_MAX_CONCURRENT = 256
_TOKEN_ID = "token_id:"


def serve_command(model: str, *, host: str = "127.0.0.1", port: int = 8000, dtype: str = "auto",
                  extra: Iterable[str] = ()) -> list[str]:
    """``vllm serve`` arguments for a server this trainer can push weights to (run it with
    ``VLLM_SERVER_DEV_MODE=1`` in the environment)."""
    return ["vllm", "serve", model, "--host", host, "--port", str(port), "--dtype", dtype,
            "--worker-extension-cls", EXTENSION, "--logprobs-mode", "processed_logprobs",
            "--generation-config", "vllm", *extra]


class ServerError(ServiceError):
    """The server answered with an error or stopped answering (status and its message, one line)."""


def _shm_folder() -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="grpo-weights-", dir=base)


class ServerEngine:
    """A ``vllm serve`` server at ``[generation] vllm_server_url`` (or host and port); see the module docs."""

    hands_over = True  # generate takes on_finished

    def __init__(self, config: RunConfig, *, dtype: str = "auto", push_bytes: int = PUSH_BYTES):
        g = config.generation
        self.url = server_url(g)
        where = urlparse(self.url)
        self._serve = dict(host=where.hostname or g.vllm_server_host, port=where.port or g.vllm_server_port,
                           dtype=dtype)
        self._model_name = getattr(getattr(config, "model", None), "name_or_path", "") or "MODEL"
        self.key = "generation.vllm_server_url" if g.vllm_server_url else "generation.vllm_server_host"
        self.push_bytes = push_bytes
        self.timeout = g.vllm_server_timeout
        self._wait_until_up()
        self.model = self._served_model()
        self._check_worker()
        self.folder = _shm_folder()
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.folder, True)

    # HTTP ------------------------------------------------------------------------------------------
    def _call(self, path: str, body: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            detail = _error_message(exc.read().decode(errors="replace"))
            raise ServerError(f"{path}: HTTP {exc.code}: {' '.join(detail.split())[:400]}") from None
        except OSError as exc:  # refused, unreachable, timed out, connection dropped
            raise ServerError(f"{path}: no answer from the vLLM server at {self.url}: "
                              f"{getattr(exc, 'reason', None) or exc}") from None
        return json.loads(text) if text.strip() else None

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + self.timeout
        reason = ""
        while True:
            try:
                self._call("/health", timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                return
            except ServerError as exc:  # refused, unreachable, starting up (503)
                reason = str(exc)
            if time.monotonic() >= deadline:
                raise ValueError(f"{self.key}: no vLLM server answered at {self.url} within {self.timeout:g} s "
                                 f"(vllm_server_timeout; last: {reason}); start one with VLLM_SERVER_DEV_MODE=1 "
                                 f"{' '.join(serve_command(self._model_name, **self._serve))}")
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def _served_model(self) -> str:
        models = (self._call("/v1/models", timeout=self.timeout) or {}).get("data") or []
        if not models:
            raise ValueError(f"{self.key}: the server at {self.url} serves no model")
        return models[0]["id"]

    def rpc(self, method: str, **kwargs: Any) -> list[Any]:
        """``method(**kwargs)`` on every worker of the server (``/collective_rpc``); their results."""
        out = self._call("/collective_rpc", {"method": method, "kwargs": kwargs})
        return (out or {}).get("results", [])

    def _check_worker(self) -> None:
        start = f"start it with VLLM_SERVER_DEV_MODE=1 {' '.join(serve_command(self.model, **self._serve))}"
        try:
            infos = self.rpc("grpo_worker_info")
        except ServerError as exc:
            if "HTTP 404" in str(exc) or "HTTP 405" in str(exc):
                raise ValueError(f"{self.key}: the server at {self.url} takes no weights (no /collective_rpc: it "
                                 f"runs without VLLM_SERVER_DEV_MODE=1); {start}") from None
            raise ValueError(f"{self.key}: the server at {self.url} cannot load weights pushed to it (no "
                             f"{EXTENSION} worker extension: {exc}); {start}") from None
        modes = {str((info or {}).get("logprobs_mode")) for info in infos}
        if modes != {"processed_logprobs"}:
            raise ValueError(f"{self.key}: the server at {self.url} returns log-probs as {', '.join(sorted(modes))}, "
                             f"not after temperature (processed_logprobs); {start}")
        dtypes = {str((info or {}).get("dtype")) for info in infos}
        want = self._serve["dtype"]
        if want != "auto" and dtypes != {want}:
            warnings.warn(f"{self.key}: the server at {self.url} runs in {', '.join(sorted(dtypes))} and the policy's "
                          f"forwards in {want}: their log-probs differ by more than kernels do (serve with "
                          f"--dtype {want})", stacklevel=2)

    # the engine interface ----------------------------------------------------------------------------
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Push ``(hf_name, tensor)`` pairs to the server (see the module docs); returns how many went."""
        from safetensors.torch import save_file

        blocks: dict[str, list[tuple[str, torch.Tensor]]] = {}
        for name, tensor in weights:
            blocks.setdefault(block(name), []).append((name, tensor))
        sent = 0
        for i, chunk in enumerate(_chunks(list(blocks.values()), self.push_bytes)):
            path = os.path.join(self.folder, f"push-{i}.safetensors")
            save_file({name: t.detach().contiguous().cpu() for name, t in chunk}, path)
            try:
                loaded = self.rpc("grpo_load_weights", path=path)
            finally:
                os.remove(path)
            if [int(n) for n in loaded] != [len(chunk)] * len(loaded):  # /collective_rpc answers ints as strings
                raise ServerError(f"the server loaded {loaded} tensors of {len(chunk)} pushed")
            sent += len(chunk)
        if sent:
            self._reset_prefix_cache()
        return sent

    def _reset_prefix_cache(self, tries: int = 20) -> None:
        """``POST /reset_prefix_cache``; vLLM refuses while blocks are held (answering ``success: false``)."""
        for _ in range(tries):
            if (self._call("/reset_prefix_cache", {}) or {}).get("success", True):
                return
            time.sleep(0.1)
        raise ServerError(f"the vLLM server at {self.url} kept its prefix cache (blocks still held) after a weight push")

    def generate(self, prompts: list[list[int]], params: list[dict[str, Any]],
                 on_finished: Callable[[int, list[Completion]], None] | None = None) -> list[list[Completion]]:
        """One ``/v1/completions`` request per prompt, concurrently; the completions of each in index order. With
        ``on_finished``, each prompt's list is also passed to it (with the prompt's index) as soon as its answer
        arrives, on this thread, while the other requests are still out. The first failure (a request's or
        ``on_finished``'s) is raised at once; requests not sent yet are dropped."""
        bodies = [self._body(ids, p) for ids, p in zip(prompts, params, strict=True)]
        results: list[list[Completion] | None] = [None] * len(bodies)
        pool = ThreadPoolExecutor(max_workers=max(1, min(_MAX_CONCURRENT, len(bodies))))
        try:
            pending = {pool.submit(self._call, "/v1/completions", body): i for i, body in enumerate(bodies)}
            for answer in as_completed(pending):
                i = pending[answer]
                choices = answer.result().get("choices") or []
                if len(choices) != bodies[i].get("n", 1):  # checked before anything is handed over or scored
                    raise ServerError(f"/v1/completions: the server returned {len(choices)} completions for a "
                                      f"request of n={bodies[i].get('n', 1)}")
                results[i] = [_completion(c) for c in sorted(choices, key=lambda c: c["index"])]
                if on_finished is not None:
                    on_finished(i, results[i])
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return results  # type: ignore[return-value]

    def _body(self, prompt: list[int], params: dict[str, Any]) -> dict[str, Any]:
        body = {"model": self.model, "prompt": prompt, "return_token_ids": True, "return_tokens_as_token_ids": True,
                **params}
        return {k: v for k, v in body.items() if v is not None}

    def wake(self) -> bool:
        return False  # a server keeps its own memory

    def sleep(self) -> None:
        pass

    def close(self) -> None:
        """Remove the shared-memory folder (also done when the engine is collected)."""
        self._cleanup()


def _chunks(blocks: list[list[tuple[str, torch.Tensor]]], limit: int) -> Iterable[list[tuple[str, torch.Tensor]]]:
    """Whole blocks, grouped up to ``limit`` bytes (a block over the limit goes alone)."""
    chunk: list[tuple[str, torch.Tensor]] = []
    size = 0
    for entries in blocks:
        nbytes = sum(t.numel() * t.element_size() for _, t in entries)
        if chunk and size + nbytes > limit:
            yield chunk
            chunk, size = [], 0
        chunk.extend(entries)
        size += nbytes
    if chunk:
        yield chunk


def _error_message(text: str) -> str:
    """The message of a vLLM/FastAPI error body (``{"error": {"message"}}``, ``{"message"}``, ``{"detail"}``)."""
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if isinstance(body, dict):
        inner = body.get("error")
        for value in (inner.get("message") if isinstance(inner, dict) else inner, body.get("message"),
                      body.get("detail")):
            if value:
                return str(value)
    return text


def _completion(choice: dict[str, Any]) -> Completion:
    """A ``/v1/completions`` choice with ``logprobs = 0`` and ``return_tokens_as_token_ids``."""
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens") or []
    ids = choice.get("token_ids")
    if ids is None:
        ids = [int(t.removeprefix(_TOKEN_ID)) for t in tokens]
    values = logprobs.get("token_logprobs") or []
    if len(values) != len(ids) or None in values:
        raise ServerError(f"the server returned {len(ids)} tokens and {len(values)} log-probs for one completion")
    return Completion(list(ids), [float(v) for v in values], choice.get("finish_reason"))
