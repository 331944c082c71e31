"""The judge as a reward: :class:`LLMJudge` (the ``llm_judge`` built-in, :mod:`grpo_rewards.builtins.llm_judge`).

Each row's prompt and completion go into the judge's prompt (:mod:`~grpo_rewards.judges.prompt`), at most
``concurrency`` requests at a time; the verdict is read from the judge's output (:mod:`~grpo_rewards.judges.verdict`)
and scored by the rubric (:mod:`~grpo_rewards.judges.rubric`), times ``value``. A row whose verdict cannot be read
scores ``None`` and counts as a parse failure; a row whose request failed after its retries scores ``None`` too,
and when every row of a call fails the call raises, so the reward's isolation counts the failure (and
``max_consecutive_failures`` stops a run whose judge is gone). The judge retries its own requests, so a failed
call is not retried row by row (:meth:`LLMJudge.row_groups`: the batch is one unit).

Verdicts are cached (least recently used first out, ``cache_size`` of them) under a key of the judge (backend,
endpoint, model), the sampling parameters, the rubric, the template, the verdict pattern, the prompt and the
completion: a completion seen again is not judged again. :meth:`LLMJudge.metrics` reports judgements, cache hits,
the parse-failure rate, request failures, mean and largest latency and judgements per second.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grpo_rewards.completions import completion_text
from grpo_rewards.judges import prompt as judge_prompt
from grpo_rewards.judges.rubric import Rubric
from grpo_rewards.judges.verdict import read_verdict


class LLMJudge:
    """A judge model's verdicts as a reward (module docs; a module-level class: it pickles with an HTTP judge)."""

    __name__ = "llm_judge"
    slots: tuple[str, ...] = ("{completion}",)  # the template's completion placeholders

    def __init__(self, judge: Any, rubric: Rubric, *, template: str = judge_prompt.DEFAULT_TEMPLATE,
                 sampling: dict[str, Any] | None = None, pattern: str | None = None, value: float = 1.0,
                 concurrency: int = 8, structured: bool = False, cache_size: int = 65536) -> None:
        judge_prompt.check_template(template, self.slots)
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self.judge, self.rubric, self.template = judge, rubric, template
        self.sampling = {"temperature": 0.0, "max_tokens": 512, **(sampling or {})}
        self.pattern = pattern
        self._pattern = re.compile(pattern) if pattern else None
        if self._pattern is not None and (self._pattern.groups != 1 or rubric.question is None):
            raise ValueError("pattern must have exactly one group (the score), and is for a rubric with one question")
        self.value, self.concurrency, self.structured, self.cache_size = value, concurrency, structured, cache_size
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._cache: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.judgements = self.cache_hits = self.parse_failures = self.request_failures = 0
        self.latency_sum = self.latency_max = self.busy_seconds = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k in (
            "judge", "rubric", "template", "sampling", "pattern", "_pattern", "value", "concurrency", "structured",
            "cache_size")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        return f"LLMJudge({self.judge!r}, concurrency={self.concurrency})"

    def worst_case(self) -> float:
        """Seconds one judgement can take with its retries (the reward's timeout must exceed it)."""
        worst = getattr(self.judge, "worst_case", None)
        return float(worst()) if callable(worst) else 0.0

    def row_groups(self, completions: list[Any], **_: Any) -> list[list[int]]:
        """One unit: a failed call is not retried row by row (the judge retried each request already)."""
        return [list(range(len(completions)))]

    def metrics(self) -> dict[str, float]:
        judged = self.judgements
        return {"judgements": judged, "cache_hits": self.cache_hits,
                "parse_failure_rate": self.parse_failures / judged if judged else 0.0,
                "request_failures": self.request_failures,
                "latency_mean_s": self.latency_sum / judged if judged else 0.0, "latency_max_s": self.latency_max,
                "judgements_per_s": judged / self.busy_seconds if self.busy_seconds else 0.0}

    def key(self, *texts: str) -> str:
        """The cache key of one judgement of ``texts`` (the prompt, then the completion or completions)."""
        identity = getattr(self.judge, "identity", repr(self.judge))
        parts = [type(self).__name__, identity, self.sampling, self.structured, self.rubric.fingerprint(),
                 self.template, self.pattern, *texts]
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode("utf-8")).hexdigest()

    def messages(self, prompt: str, completion: str) -> list[dict[str, str]]:
        return judge_prompt.messages(self.template, self.rubric.text(), self.rubric.output_format(), prompt, completion)

    def json_schema(self) -> dict[str, Any]:
        return self.rubric.json_schema()

    def verdict_score(self, verdict: dict[str, Any]) -> float | None:
        return self.rubric.score(verdict)

    def _judge_one(self, texts: tuple[str, ...]) -> tuple[str, float | None, float]:
        """``(status, score, seconds)``: status ``ok``, ``parse`` (no verdict read) or ``request`` (no answer)."""
        start = time.perf_counter()
        try:
            output = self.judge.complete(self.messages(*texts), dict(self.sampling),
                                         self.json_schema() if self.structured else None)
        except Exception:  # noqa: BLE001 - counted; the row scores None
            return "request", None, time.perf_counter() - start
        seconds = time.perf_counter() - start
        verdict = read_verdict(output, self._pattern)
        score = None if verdict is None else self.verdict_score(verdict)
        return ("parse", None, seconds) if score is None else ("ok", score, seconds)

    def ask(self, items: list[tuple[str, ...]]) -> list[float | None]:
        """One judgement of each item (the texts the judge's messages are made of), from the cache when it holds
        one, the others asked at most ``concurrency`` at a time; ``None`` where no verdict was read. Raises when
        every request failed (the judge is gone)."""
        out: list[float | None] = [None] * len(items)
        todo: dict[str, list[int]] = {}
        with self._lock:
            for i, texts in enumerate(items):
                k = self.key(*texts)
                if k in self._cache:
                    self._cache.move_to_end(k)
                    out[i] = self._cache[k]
                    self.cache_hits += 1
                else:
                    todo.setdefault(k, []).append(i)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="llm-judge")
        start = time.perf_counter()
        keys = list(todo)
        results = list(self._pool.map(lambda k: self._judge_one(items[todo[k][0]]), keys))
        with self._lock:
            self.busy_seconds += time.perf_counter() - start
            for k, (status, score, seconds) in zip(keys, results, strict=True):
                self.judgements += 1
                self.latency_sum += seconds
                self.latency_max = max(self.latency_max, seconds)
                if status == "request":
                    self.request_failures += 1
                    continue
                if status == "parse":
                    self.parse_failures += 1
                    continue
                assert score is not None
                for i in todo[k]:
                    out[i] = score
                if self.cache_size:
                    self._cache[k] = score
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        if keys and all(status == "request" for status, _, _ in results) and all(v is None for v in out):
            raise RuntimeError(f"the judge {getattr(self.judge, 'identity', self.judge)} answered none of "
                               f"{len(keys)} request(s)")
        return out

    def __call__(self, completions: list[Any], prompts: list[Any] | None = None, **_: Any) -> list[float | None]:
        n = len(completions)
        items = [(judge_prompt.message_text(p), _text(c))
                 for p, c in zip(prompts if prompts is not None else [""] * n, completions, strict=True)]
        return [None if s is None else self.value * s for s in self.ask(items)]


def _text(completion: Any) -> str:
    try:
        return completion_text(completion)
    except TypeError:
        return judge_prompt.message_text(completion)
