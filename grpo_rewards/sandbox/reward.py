"""The code rewards: run each completion's code against its row's tests and score the pass fraction.

``code_execution`` scores passed/total, ``code_execution_binary`` 1 only when every
test passes. A whole generation batch goes to the backend at once (parallel across
the pool). A completion without a code block scores 0 (with a reason in
``last_details``). Whatever the program can cause (a crash, a limit, a compile error, a
malformed report, a sandbox process it killed) is its failure and scores as one; only
an infrastructure failure (a sandbox error, a backend that cannot run) scores ``None``,
counted in :meth:`CodeExecutionReward.metrics`. Weak asserts, which a program can
forge, are not run unless ``weak_tests = "include"``.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import logging
import pickle
import threading
from collections import Counter
from typing import Any

from grpo_rewards.completions import completion_text
from grpo_rewards.plugins import current_registry, get_registry
from grpo_rewards.sandbox import languages
from grpo_rewards.sandbox.extract import extract_code
from grpo_rewards.sandbox.judge import Outcome, judge, program_for
from grpo_rewards.sandbox.program import SANDBOX_ERROR, WRONG, Limits, RunResult
from grpo_rewards.sandbox.tests_formats import (
    AssertCase,
    StdioCase,
    TestCase,
    TestFormatError,
    TestSuite,
    parse_tests,
)

log = logging.getLogger("grpo.sandbox")

_backends: dict[tuple[Any, ...], Any] = {}
_backends_lock = threading.Lock()


def shared_backend(name: str, factory: Any = None, **options: Any) -> Any:
    """One backend per (name, factory, options) in this process, so several code rewards share one pool.

    ``factory`` is the backend's registered factory (default: ``name``'s in the process-wide registry).
    Limits are not options: each program carries its own, so a pass-fraction and a
    binary reward with different limits still share the same slots.
    """
    if factory is None:
        factory = get_registry().get("sandbox_backends", name)
    try:
        same: Any = hash(factory) and factory
    except TypeError:  # an unhashable callable: the object itself
        same = id(factory)
    key = (name, same, *sorted((k, repr(v)) for k, v in options.items()))
    with _backends_lock:
        if key not in _backends:
            _backends[key] = factory(**options)
        return _backends[key]


@atexit.register
def close_backends() -> None:
    with _backends_lock:
        for backend in _backends.values():
            with contextlib.suppress(Exception):
                backend.close()
        _backends.clear()


class CodeExecutionReward:
    """A TRL-style batch reward (see module docs)."""

    def __init__(self, *, binary: bool, tests_column: str, language: str, backend: str, limits: Limits,
                 backend_options: dict[str, Any], max_tests: int, float_tolerance: float = 0.0,
                 weak_tests: str = "exclude", backend_factory: Any = None):
        self.__name__ = "code_execution_binary" if binary else "code_execution"
        self.binary = binary
        self.tests_column = tests_column
        self.language = language
        self.backend_name = backend
        self.limits = limits
        self.backend_options = backend_options
        self.max_tests = max_tests
        self.float_tolerance = float_tolerance
        self.weak_tests = weak_tests
        self.last_details: list[dict[str, Any]] = []
        self._counts: Counter[str] = Counter()
        self._backend: Any = None
        self._backend_factory = backend_factory  # from the registry it was built from; not pickled

    @property
    def backend(self) -> Any:
        """The backend (started on first use; shared with other code rewards of the same options)."""
        if self._backend is None:
            # limits travel with each program, so rewards with different limits share one pool
            self._backend = shared_backend(self.backend_name, self._backend_factory, **self.backend_options)
        return self._backend

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its backend (a pool of processes): a copy in another process starts, or shares, its
        own, with the same factory (or, when the factory does not pickle, the one of that process's registry)."""
        try:
            pickle.dumps(self._backend_factory)
            factory = self._backend_factory
        except Exception:  # a closure or lambda: looked up by name where the copy runs
            factory = None
        return {**self.__dict__, "_backend": None, "_backend_factory": factory}

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        cells = columns.get(self.tests_column)
        if cells is None:
            raise KeyError(f"column {self.tests_column!r} is missing ({self.__name__} reads its tests from it; "
                           f"set tests_column)")
        scores: list[float | None] = [None] * len(completions)
        details: list[dict[str, Any]] = [{} for _ in completions]
        jobs = []
        for i, (completion, cell) in enumerate(zip(completions, cells, strict=True)):
            code, reason = extract_code(completion_text(completion), self.language)
            if code is None:
                scores[i], details[i] = 0.0, {"reason": reason}
                self._counts["no_code"] += 1
                continue
            try:
                suite = parse_tests(cell, self.language)
            except TestFormatError as exc:
                details[i] = {"reason": f"row {i}: {self.tests_column}: {exc}"}
                self._counts["bad_tests"] += 1
                log.warning("%s: row %d: column %r: %s; scored None", self.__name__, i, self.tests_column, exc)
                continue
            cases, why_none = self._cases(suite)
            if why_none:
                details[i] = {"reason": f"row {i}: {self.tests_column}: {why_none}"}
                log.warning("%s: row %d: column %r: %s; scored None", self.__name__, i, self.tests_column, why_none)
                continue
            for case in cases:
                jobs.append((i, case, program_for(code, case, self.limits, suite.language)))
        try:
            results = self.backend.run([p.program for _, _, p in jobs]) if jobs else []
        except Exception as exc:  # the backend could not run at all (pool failed to start, remote down)
            self._counts["infrastructure_errors"] += len({i for i, _, _ in jobs})
            log.error("%s: the %s sandbox backend failed (%s: %s); %d row(s) scored None", self.__name__,
                      self.backend_name, type(exc).__name__, exc, len({i for i, _, _ in jobs}))
            results = [RunResult(SANDBOX_ERROR, error=f"backend failed: {exc}") for _ in jobs]
        per_row: dict[int, list[Outcome]] = {}
        for (i, case, prepared), result in zip(jobs, results, strict=True):
            try:
                outcome = judge(case, prepared, result, float_tolerance=self.float_tolerance)
            except Exception as exc:  # whatever the program printed, it is the program's failure
                self._counts["judge_errors"] += 1
                outcome = Outcome(WRONG, f"output could not be judged ({type(exc).__name__})")
            per_row.setdefault(i, []).append(outcome)
            self._counts[outcome.status] += 1
            self._counts["weak_tests"] += outcome.weak
        for i, outcomes in per_row.items():
            passed = sum(o.passed for o in outcomes)
            details[i] = {"passed": passed, "total": len(outcomes), "statuses": [o.status for o in outcomes],
                          "reasons": [o.reason for o in outcomes if not o.passed][:3],
                          "weak": sum(o.weak for o in outcomes)}
            if any(o.status == SANDBOX_ERROR for o in outcomes):
                scores[i] = None
            elif self.binary:
                scores[i] = 1.0 if passed == len(outcomes) else 0.0
            else:
                scores[i] = passed / len(outcomes)
        self.last_details = details
        return scores

    def _cases(self, suite: TestSuite) -> tuple[list[TestCase], str]:
        """The cases to run, or why the row cannot be scored (then ``None``, a dataset problem)."""
        cases = suite.cases
        lang = languages.get(suite.language)
        if lang is not None and lang.stdio_only and any(not isinstance(c, StdioCase) for c in cases):
            self._counts["bad_tests"] += 1
            return [], f"{suite.language} programs are judged on stdin/stdout tests only"
        if self.weak_tests == "exclude":
            cases = [c for c in cases if not (isinstance(c, AssertCase) and c.weak)]
            if not cases:
                self._counts["only_weak_tests"] += 1
                return [], ("every test is a weak assert, which a program can forge (weak_tests = \"exclude\"); "
                            "set weak_tests = \"include\" to trust them")
        return (cases[: self.max_tests] if self.max_tests else cases), ""

    def metrics(self) -> dict[str, Any]:
        """Test statuses so far, the sandbox-error rate, and the backend's layers."""
        counts = dict(self._counts)
        tests = sum(v for k, v in counts.items()
                    if k not in ("no_code", "bad_tests", "weak_tests", "only_weak_tests", "infrastructure_errors",
                                 "judge_errors"))
        backend = self._backend.metrics() if self._backend is not None else {}
        return {"counts": counts, "tests": tests,
                "sandbox_error_rate": counts.get(SANDBOX_ERROR, 0) / tests if tests else 0.0,
                "backend": backend}


def _build(
    *,
    tests_column: str = "verification_info",
    language: str = "python",
    backend: str = "local",
    url: str = "",
    cpu_seconds: float = 5.0,
    wall_seconds: float = 10.0,
    memory_mb: int = 1024,
    output_kb: int = 1024,
    max_tests: int = 0,
    float_tolerance: float = 0.0,
    weak_tests: str = "exclude",
    slots: int = 0,
    concurrency: int = 16,
    profile: str = "auto",
    allow_unsafe_execution: bool = False,
    packages: tuple[str, ...] = (),
    binary: bool = False,
) -> CodeExecutionReward:
    limits = Limits(cpu_seconds=cpu_seconds, wall_seconds=wall_seconds, memory_mb=memory_mb,
                    output_bytes=int(output_kb) * 1024)

    # the registry this reward is built from (reward(..., registry=...)); an unknown name is a config error now
    factory = current_registry().get("sandbox_backends", backend)
    options: dict[str, Any] = {}
    if weak_tests not in ("exclude", "include"):
        raise ValueError(f"weak_tests must be \"exclude\" or \"include\", got {weak_tests!r}")
    if backend == "local":
        lang = languages.get(language)
        if lang is None or not lang.local:
            raise ValueError(f"the local backend runs {', '.join(languages.local_names())}; language = {language!r} "
                             "needs a remote backend")
        from grpo_rewards.sandbox import probe  # ctypes: not at plugin registration, which imports this

        probe.check_profile(tuple(probe.select_layers(profile, probe.probe())), allow_unsafe_execution)
        if lang.compiled and lang.name not in languages.compilers():
            raise ValueError(f"language = {language!r} needs {lang.compiler} on this machine "
                             "(apt-get install gcc g++)")
        if isinstance(packages, str) or not all(isinstance(p, str) for p in packages):
            raise ValueError(f"packages must be a list of import names (the packages programs may import beside "
                             f"the standard library), got {packages!r}")
        from grpo_rewards.sandbox.packages import resolve

        resolve(packages)  # a name this interpreter cannot import is a config error now, not at the first batch
        options = {"slots": slots, "allow_unsafe_execution": allow_unsafe_execution, "profile": profile}
        if packages:
            options["packages"] = tuple(packages)
    else:
        if not url:
            raise ValueError(f"backend {backend!r} needs url = \"http://host:port\"")
        options = {"url": url, "concurrency": concurrency}
    if max_tests < 0:
        raise ValueError("max_tests must be >= 0 (0 runs every test)")
    if not 0 <= float_tolerance < 1:
        raise ValueError(f"float_tolerance must be in [0, 1) (0: exact text), got {float_tolerance}")
    return CodeExecutionReward(binary=binary, tests_column=tests_column, language=language, backend=backend,
                               limits=limits, backend_options=options, max_tests=max_tests,
                               float_tolerance=float_tolerance, weak_tests=weak_tests, backend_factory=factory)


def make_code_execution(**params: Any) -> CodeExecutionReward:
    """Pass fraction of the tests in ``tests_column`` for the last fenced code block of each completion.

    Tests formats: open-r1 ``verification_info``, SandboxFusion ``inputs``/``outputs`` and
    ``fn_name``, MBPP/HumanEval asserts (weaker). Limits apply per test. ``backend`` is
    ``local`` (the sandbox pool), ``sandboxfusion`` or ``piston`` (with ``url``).
    """
    return _build(**params, binary=False)


def make_code_execution_binary(**params: Any) -> CodeExecutionReward:
    """1 when every test passes, else 0 (same parameters as ``code_execution``)."""
    return _build(**params, binary=True)


# Both factories take _build's keyword parameters (less ``binary``): one list, shown by
# ``grpo rewards show`` and checked against TOML keys through the signature.
_SIGNATURE = inspect.signature(_build)
_SIGNATURE = _SIGNATURE.replace(parameters=[p for p in _SIGNATURE.parameters.values() if p.name != "binary"])
make_code_execution.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
make_code_execution_binary.__signature__ = _SIGNATURE  # type: ignore[attr-defined]
