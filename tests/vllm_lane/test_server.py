"""``vllm_mode = "server"`` against a real ``vllm serve`` (vLLM's CPU build, fp32) on 127.0.0.1, started here as a
subprocess on a free port with the worker extension and ``VLLM_SERVER_DEV_MODE=1``:

* generation returns the group's tokens with the sampler's log-probs (equal to the policy's within
  ``LOGP_ATOL``), seeded runs repeat, and greedy completions are the HF backend's token for token;
* after optimizer steps the pushed weights make the server's greedy output and log-probs the updated
  policy's again (full fine-tuning, pushed in several files; LoRA, merged on the fly), and a change never
  pushed leaves it stale (the control);
* a server in another dtype than the policy's forwards is a warning;
* three ``grpo train`` steps with ``vllm_mode = "server"`` end with a checkpoint;
* an unreachable server is one line and exit status 2 after ``vllm_server_timeout``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (bash scripts/setup.sh --vllm makes .venv-vllm)")

import torch  # noqa: E402

from grpo_core.generation.vllm.server import ServerEngine, serve_command  # noqa: E402
from tests.vllm_lane.conftest import PROMPTS  # noqa: E402
from tests.vllm_lane.test_engine import LOGP_ATOL, Setup, assert_engine_is_policy, max_gap  # noqa: E402
from tests.vllm_lane.test_train import RUN  # noqa: E402

START_TIMEOUT = 600  # seconds for `vllm serve` to answer /health on the shared 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env() -> dict[str, str]:
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_LOGGING_LEVEL": "WARNING"}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the server's own default (an engine process)
    return env


@pytest.fixture(scope="module")
def server(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    cmd = serve_command(str(tiny_dir), port=port, dtype="float32",
                        extra=["--enforce-eager", "--max-model-len", "128", "--seed", "0"])
    # vllm-cpu's `vllm` script looks up the distribution "vllm" and fails; its server module is the same command
    cmd[:3] = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", cmd[2]]
    with running_server(cmd, port, tmp_path_factory.mktemp("server") / "serve.log", "vllm serve"):
        yield port


@contextlib.contextmanager
def running_server(cmd: list[str], port: int, log: Path, what: str) -> Iterator[None]:
    """``cmd`` (a vLLM OpenAI server on ``port``) started, its output in ``log``, until it answers ``/health``
    (a test failure naming the log's end when it exits or stays silent past START_TIMEOUT); stopped after."""
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=server_env())
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}: {log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                if time.monotonic() - start > START_TIMEOUT:
                    pytest.fail(f"vllm serve did not answer in {START_TIMEOUT} s: {log.read_text()[-3000:]}")
                time.sleep(1)
        print(f"\n{what} start-up: {time.monotonic() - start:.1f} s")
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def remote(server: int, tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the server's dtype is the policy's: no warning
        setup = Setup(tiny_dir, tmp_path_factory.mktemp("remote"),
                      generation={"vllm_mode": "server", "vllm_server_port": server, "vllm_server_timeout": 60})
    yield setup
    setup.vllm.engine.close()


def test_generation_returns_tokens_and_logprobs(remote: Setup) -> None:
    torch.manual_seed(3)
    start = time.monotonic()
    batch = remote.vllm.generate(remote.prompts, 4)
    seconds = time.monotonic() - start
    assert batch.completion_ids.shape[0] == len(remote.prompts) * 4
    assert batch.sampling_logps.shape == batch.completion_ids.shape
    mask = batch.completion_mask.bool()
    assert (batch.sampling_logps[mask] < 0).all() and (batch.sampling_logps[~mask] == 0).all()
    assert len({tuple(r.tolist()) for r in batch.completion_ids}) > len(remote.prompts)  # groups are not copies
    assert max_gap(remote.model, batch) < LOGP_ATOL  # temperature 1: the sampler's log-probs are the policy's
    lengths = batch.completion_mask.sum(1)
    assert torch.equal(batch.truncated, lengths == remote.cfg.generation.max_completion_length)
    print(f"\nserver generation: {batch.num_tokens} tokens in {seconds:.2f} s "
          f"({batch.num_tokens / seconds:.0f} tokens/s, first call, weights pushed first)")
    torch.manual_seed(3)
    again = remote.vllm.generate(remote.prompts, 4)
    assert torch.equal(batch.completion_ids, again.completion_ids)  # seeds come from torch's RNG


def test_a_server_in_another_dtype_is_a_warning(remote: Setup) -> None:
    with pytest.warns(UserWarning, match="runs in float32 and the policy's forwards in bfloat16"):
        ServerEngine(remote.cfg, dtype="bfloat16").close()


def test_greedy_equals_hf(remote: Setup) -> None:
    batch = assert_engine_is_policy(remote)
    assert batch.completion_mask.sum(1).min() > 1


def test_pushed_weights_follow_the_policy(remote: Setup) -> None:
    remote.vllm.engine.push_bytes = 64 << 10  # several files per push (the model is ~0.4 MB)
    before = remote.vllm.generate(remote.prompts, 1, greedy=True).completion_ids
    saved = {n: p.detach().clone() for n, p in remote.model.named_parameters()}
    with torch.no_grad():  # the control: a change never pushed leaves the server stale
        for p in remote.model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    remote.vllm.weights.changed()  # marks everything as sent without sending it
    stale = remote.vllm.generate(remote.prompts, 1, greedy=True)
    assert max_gap(remote.model, stale) > 100 * LOGP_ATOL
    with torch.no_grad():
        for n, p in remote.model.named_parameters():
            p.copy_(saved[n])  # back to what the server holds (and a version bump: pushed again)
    optimizer = torch.optim.AdamW([p for p in remote.model.parameters() if p.requires_grad], lr=3e-2)
    for _ in range(3):  # push the policy towards other tokens
        loss = remote.model(input_ids=before[:, :4]).logits.log_softmax(-1)[..., 5].mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    start = time.monotonic()
    sent = remote.vllm.sync_weights()
    print(f"\nserver weight push: {sent} tensors in {time.monotonic() - start:.2f} s")
    assert sent == len(list(remote.vllm.weights._entries()))  # full fine-tuning: every tensor changed
    after = assert_engine_is_policy(remote)
    assert not torch.equal(before, after.completion_ids)  # the updates changed what greedy decoding says
    assert remote.vllm.sync_weights() == 0  # nothing changed since: nothing pushed


def test_pushed_lora_weights_follow_the_policy(server: int, tiny_dir: Path, tmp_path: Path) -> None:
    setup = Setup(tiny_dir, tmp_path, generation={"vllm_mode": "server", "vllm_server_port": server},
                  lora={"enabled": True, "r": 4, "alpha": 16, "target_modules": ["q_proj", "v_proj", "up_proj"]})
    try:
        before = assert_engine_is_policy(setup).completion_ids  # the first call pushes every tensor
        total = len(list(setup.vllm.weights._entries()))
        optimizer = torch.optim.AdamW([p for p in setup.model.parameters() if p.requires_grad], lr=5e-2)
        for _ in range(3):
            loss = setup.model(input_ids=before[:, :4]).logits.log_softmax(-1)[..., 5].mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        sent = setup.vllm.sync_weights()
        assert 0 < sent < total  # the adapted blocks (merged on the fly), not norms or embeddings
        after = assert_engine_is_policy(setup)
        assert not torch.equal(before, after.completion_ids)
    finally:
        setup.vllm.engine.close()
        setup.close()


def _train(tmp_path: Path, model: Path, *overrides: str) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS * 2))
    run = tmp_path / "run.toml"
    run.write_text(RUN.format(model=model, data=data, rule="sequence_mask", mu=1, lora="false"))
    out = tmp_path / "out"
    sets = [arg for o in ("generation.vllm_mode=server", *overrides) for arg in ("--set", o)]
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grpo_rewards", "train", str(run), "--set",
                           f"logging.output_dir={out}", *sets], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)
    return proc, out, time.monotonic() - start


def test_three_steps_end_with_a_checkpoint(server: int, tiny_dir: Path, tmp_path: Path) -> None:
    proc, out, _ = _train(tmp_path, tiny_dir, f"generation.vllm_server_port={server}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [m for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    for m in steps:  # the server's log-probs are the policy's (fp32 both sides): ratios near 1
        assert 0.99 < m["sampling/importance_sampling_ratio/mean"] < 1.01
        assert m["sampling/sampling_logp_difference/max"] < LOGP_ATOL
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert checkpoints and checkpoints[-1].endswith("3")
    assert (out / "model" / "config.json").is_file()


def test_an_unreachable_server_is_one_line(tiny_dir: Path, tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    proc, _, seconds = _train(tmp_path, tiny_dir, f"generation.vllm_server_port={port}",
                              "generation.vllm_server_timeout=3")
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{tmp_path / 'run.toml'}: generation.vllm_server_host: no vLLM server answered at "
                           f"http://127.0.0.1:{port} within 3 s (vllm_server_timeout; last: "), last
    assert seconds >= 3
