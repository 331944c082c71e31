"""``[trainer] backend = "trl"``: one of our TOML files trained by TRL's GRPOTrainer through ``grpo train``,
with our model loading (LoRA as TRL's peft_config), our data loading and our composed rewards, each logged
by TRL under its alias with its weight; stopped by SIGINT (checkpoint, exit 130) and resumed from TRL's
checkpoint. Plus the config mapping (batch shape, step count), the documented key list and the registry."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from grpo_rewards import hookimpl
from grpo_rewards.command_line import main

pytest.importorskip("trl")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "run-config.md"

CONFIG = """
[model]
name_or_path = "{model}"
dtype = "float32"
gradient_checkpointing = false

[data]
source = "{rows}"
prompt_field = "question"
eval_size = 2

[generation]
num_generations = 4
max_completion_length = 8

[grpo]
learning_rate = 0.01
prompts_per_step = 2
gradient_accumulation_steps = 2
max_steps = 3
share_prompts = true

[lora]
enabled = true
r = 4
alpha = 8

[logging]
output_dir = "{out}"
progress = false
plot = false
eval_every = 2

[checkpoint]
every = 0

[trainer]
backend = "trl"

[rewards.len]
use = "core_len"
weight = 0.5

[rewards.match]
use = "core_match"
weight = 2.0
"""


def _write_run(tmp_path: Path, model_dir: Path) -> Path:
    rows = [{"question": f"What is {a} plus {b}?", "answer": str(a + b)} for a in range(4) for b in range(2)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "run.toml"
    path.write_text(CONFIG.format(model=model_dir, rows=tmp_path / "rows.jsonl", out=tmp_path / "run"))
    return path


class _SigintAfter:
    """Sends this process SIGINT once step ``step``'s metrics are reported (as Ctrl-C would)."""

    def __init__(self, step: int):
        self.step, self.fired = step, False

    @hookimpl
    def grpo_on_step_end(self, context: Any, step: int, metrics: dict[str, float]) -> None:
        if step == self.step and not self.fired:
            self.fired = True
            self.context = context
            os.kill(os.getpid(), signal.SIGINT)


def test_trl_backend_trains_a_toml_run_and_logs_each_reward_by_alias_and_weight(
    tiny_model_dir: Path, tmp_path: Path, use_core_registry: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    from safetensors.torch import load_file

    from grpo_core.trainer_backends.trl_mapping import NO_TRL_EQUIVALENT

    path = _write_run(tmp_path, tiny_model_dir)
    run = tmp_path / "run"
    # Ctrl-C once step 1 is reported (at step 2's start): step 2 finishes, is checkpointed, exit 130
    interrupter = _SigintAfter(1)
    use_core_registry.manager.register(interrupter, name="sigint_after")
    try:
        assert main(["train", str(path)]) == 130
    finally:
        use_core_registry.manager.unregister(name="sigint_after")
    assert interrupter.fired
    seen = interrupter.context  # the hook's documented context, as the built-in trainer gives it
    assert (seen.backend, seen.step, seen.run_dir, seen.config.logging.output_dir) == ("trl", 1, run, str(run))
    assert seen.max_steps == 3 and {"loss", "rewards/len"} <= set(seen.metrics)
    err = capfd.readouterr().err  # (the SIGINT line is written to fd 2 directly)
    assert "SIGINT: finishing this step" in err
    for key in NO_TRL_EQUIVALENT:  # one warning line per key TRL cannot honour that the config sets, no other
        want = 1 if key == "grpo.share_prompts" else 0
        assert len(re.findall(rf"^warning: .*{re.escape(key)} has no TRL equivalent", err, re.M)) == want, err
    assert "is deprecated and will be removed in v6" not in err  # transformers' renames, raised inside TRL/peft

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]  # one line per step, the evaluation on its step's line
    assert "eval/reward/mean" not in records[0]
    assert records[1]["eval/rewards/match"] is not None and records[1]["eval/rewards/len"] < 0
    assert records[1]["eval/reward/mean"] == pytest.approx(
        0.5 * records[1]["eval/rewards/len"] + 2.0 * records[1]["eval/rewards/match"], abs=1e-5)
    for r in records:
        assert r["rewards/len/weight"] == 0.5 and r["rewards/match/weight"] == 2.0
        assert r["rewards/match"] is not None  # core_match got the answer column (None without it)
        assert r["rewards/len"] < 0  # core_len: minus 0.01 per character
        # TRL applied our weights: its total is the weighted sum of the per-reward means
        assert r["reward/mean"] == pytest.approx(0.5 * r["rewards/len"] + 2.0 * r["rewards/match"], abs=1e-5)
        assert {"loss", "grad_norm", "completion_length/mean", "rewards/len/failures"} <= set(r)

    # TRL's own log history (in the SIGINT checkpoint) names each reward by its alias, with its weight
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2"]
    state = json.loads((run / "checkpoint-2" / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "loss" in h]
    assert len(steps) == 2
    for h in steps:
        assert {"rewards/len/mean", "rewards/match/mean"} <= set(h)
        assert h["rewards/len/weight"] == 0.5 and h["rewards/match/weight"] == 2.0

    # the LoRA adapter (TRL's peft_config from our [lora]) was trained: lora_B starts at zero
    adapter = load_file(run / "model" / "adapter_model.safetensors")
    lora_b = [t for name, t in adapter.items() if "lora_B" in name]
    assert lora_b and any(t.abs().max() > 0 for t in lora_b)
    assert json.loads((run / "model" / "adapter_config.json").read_text())["r"] == 4

    # --resume continues from TRL's newest checkpoint to max_steps; metrics.jsonl keeps one line per step
    assert main(["train", str(path), "--resume"]) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert records[2]["eval/reward/mean"] is not None  # the held-out rows are scored at the last step too


def test_dry_run_says_the_estimate_is_the_built_in_trainers(
    tiny_model_dir: Path, tmp_path: Path, use_core_registry: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", str(_write_run(tmp_path, tiny_model_dir)), "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "estimated peak" in captured.out
    assert "warning: this is the built-in trainer's peak; trainer.backend = 'trl' has its own" in captured.err


def test_resume_without_a_trl_checkpoint_is_one_line(
    tiny_model_dir: Path, tmp_path: Path, use_core_registry: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write_run(tmp_path, tiny_model_dir)
    assert main(["train", str(path), "--resume"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --resume: no TRL checkpoint (checkpoint-<step>) in {tmp_path / 'run'}")
    assert not (tmp_path / "run").exists()  # nothing written


def test_a_fresh_run_never_inherits_an_earlier_runs_trl_checkpoints(
    tiny_model_dir: Path, tmp_path: Path, core_registry: Any
) -> None:
    from grpo_core.config import load_config
    from grpo_core.run_folder.checkpoints import RunFolderError
    from grpo_core.trainer_backends.trl_backend import TRLBackend

    cfg = load_config(_write_run(tmp_path, tiny_model_dir), registry=core_registry)
    run = tmp_path / "run"
    stale = run / "checkpoint-7"
    stale.mkdir(parents=True)
    (stale / "trainer_state.json").write_text("{}")
    (run / "metrics.jsonl").write_text('{"step": 7}\n')
    with pytest.raises(RunFolderError, match=r"holds an earlier TRL run \(checkpoint-7\)"):
        TRLBackend(cfg, registry=core_registry)
    assert stale.is_dir()  # refused, nothing removed
    (run / "metrics.jsonl").unlink()  # what --overwrite clears: the records, not TRL's folders
    backend = TRLBackend(cfg, registry=core_registry)
    assert stale.is_dir()  # nothing removed while the inputs are checked and the model loads
    backend.trainer.train = lambda **kwargs: None  # TRL's loop itself is not the point here
    backend.train()
    assert not stale.exists()  # could otherwise be rotated in as the newest checkpoint, or resumed


def test_over_long_prompts_follow_the_built_in_rule(
    tiny_model_dir: Path, tmp_path: Path, core_registry: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from grpo_core.config import load_config
    from grpo_core.trainer_backends.trl_backend import TRLBackend

    path = _write_run(tmp_path, tiny_model_dir)
    rows = (tmp_path / "rows.jsonl").read_text()
    long = json.dumps({"question": "plus " * 150 + "?", "answer": "0"})
    (tmp_path / "rows.jsonl").write_text(long + "\n" + rows)  # first: a training row (the last 2 are held out)

    def backend(policy: str) -> TRLBackend:
        cfg = load_config(path, ["data.max_prompt_length=100", f"data.overlong_prompts={policy}"],
                          registry=core_registry)
        return TRLBackend(cfg, registry=core_registry)

    with pytest.warns(UserWarning, match=r"1 of 7 training prompts are longer than 100 tokens .*; dropped"):
        dropped = backend("drop")
    assert len(dropped.train_dataset) == 6 and not any("plus plus" in p for p in dropped.train_dataset["prompt"])
    assert len(dropped.eval_dataset) == 2
    with pytest.raises(ValueError, match="1 of 7 training prompts are longer than 100 tokens"):
        backend("error")
    capsys.readouterr()
    with pytest.warns(UserWarning, match="cut off"):
        kept = backend("truncate")  # TRL cannot cut a prompt: kept whole, and said so
    assert len(kept.train_dataset) == 7
    assert "data.overlong_prompts has no TRL equivalent: \"truncate\"" in capsys.readouterr().err


def test_mapping_gives_trl_the_same_batch_and_step_count(core_registry: Any) -> None:
    import trl

    from grpo_core.config import config_from_dict
    from grpo_core.trainer_backends.trl_mapping import grpo_config_kwargs
    from grpo_rewards import ConfigError

    cfg = config_from_dict({
        "model": {"name_or_path": "m"}, "data": {"source": "hub/x"},
        "generation": {"num_generations": 4},
        "grpo": {"prompts_per_step": 3, "gradient_accumulation_steps": 2, "num_iterations": 2, "max_steps": 5,
                 "lr_scheduler": "cosine", "warmup_ratio": 0.1, "epsilon": 0.2, "epsilon_high": 0.28},
        "checkpoint": {"every": 2, "keep_last": 3},
        "trainer": {"backend": "trl"},
        "rewards": {"a": {"use": "core_len", "weight": 0.5}, "b": {"use": "core_match"}},
    }, registry=core_registry)
    args = trl.GRPOConfig(**grpo_config_kwargs(cfg))
    # one of our steps: 12 sequences in 2 micro-batches of 6, generated at once, reused num_iterations times
    assert args.per_device_train_batch_size == 6 and args.gradient_accumulation_steps == 2
    assert args.generation_batch_size == cfg.sequences_per_step == 12 and args.steps_per_generation == 2
    assert args.max_steps == 10 and args.num_iterations == 2  # TRL counts optimizer steps
    assert args.save_steps == 4 and args.save_total_limit == 3
    assert args.reward_weights == [0.5, 1.0] and args.epsilon_high == 0.28
    assert args.lr_scheduler_type == "cosine" and args.warmup_steps == 0.1

    assert args.use_vllm is False and args.min_p is None

    # the vLLM keys, checked without vLLM: GRPOConfig only records them
    vllm = {"backend": "vllm", "num_generations": 4, "min_p": 0.05, "stop": ["</answer>"],
            "importance_sampling": "token_truncate", "importance_sampling_max": 2.0,
            "vllm_mode": "server", "vllm_server_url": "http://localhost:8000", "vllm_server_timeout": 30.0,
            "vllm_sleep_level": 1, "vllm_max_model_len": 1024}
    kwargs = grpo_config_kwargs(dataclasses.replace(cfg, generation=dataclasses.replace(cfg.generation, **vllm)))
    args = trl.GRPOConfig(**kwargs)
    assert args.use_vllm and args.vllm_mode == "server" and args.vllm_server_base_url == "http://localhost:8000"
    assert args.vllm_server_timeout == 30.0 and args.vllm_server_host == "127.0.0.1" and args.vllm_server_port == 8000
    assert args.min_p == 0.05 and args.generation_kwargs == {"stop": ["</answer>"]}
    assert args.vllm_importance_sampling_correction and args.vllm_importance_sampling_mode == "token_truncate"
    assert args.vllm_importance_sampling_clip_max == 2.0 and args.vllm_importance_sampling_clip_min is None
    assert args.vllm_enable_sleep_mode and args.vllm_max_model_length == 1024
    none = dataclasses.replace(cfg.generation, backend="vllm", importance_sampling="none")
    colocated = grpo_config_kwargs(dataclasses.replace(cfg, generation=none))
    assert colocated["vllm_importance_sampling_correction"] is False and colocated["vllm_mode"] == "colocate"
    assert "vllm_server_base_url" not in colocated and "vllm_server_host" not in colocated
    hosted = dataclasses.replace(none, vllm_mode="server", vllm_server_host="10.0.0.2", vllm_server_port=8123)
    args = trl.GRPOConfig(**grpo_config_kwargs(dataclasses.replace(cfg, generation=hosted)))
    assert (args.vllm_server_host, args.vllm_server_port, args.vllm_server_base_url) == ("10.0.0.2", 8123, None)

    cfg.generation.backend = "my_backend"
    with pytest.raises(ConfigError, match="generation.backend: the trl trainer backend generates with"):
        grpo_config_kwargs(cfg)


def test_a_loss_type_trl_does_not_have_is_refused_naming_the_key(core_registry: Any) -> None:
    import trl

    from grpo_core.config import config_from_dict
    from grpo_core.trainer_backends.trl_mapping import TRL_LOSS_TYPES, grpo_config_kwargs
    from grpo_rewards import ConfigError

    # the list is TRL's own: the names its GRPOConfig.loss_type documents as supported
    help_text = {f.name: f for f in dataclasses.fields(trl.GRPOConfig)}["loss_type"].metadata["help"]
    supported = help_text[help_text.index("Supported values are"):].split(".")[0]
    assert set(re.findall(r"'(\w+)'", supported)) == set(TRL_LOSS_TYPES)

    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "trainer": {"backend": "trl"},
            "rewards": {"a": {"use": "core_len"}}}
    for name in TRL_LOSS_TYPES:  # every built-in loss type runs as TRL's own
        cfg = config_from_dict({**base, "grpo": {"loss_type": name}}, registry=core_registry)
        assert trl.GRPOConfig(**grpo_config_kwargs(cfg)).loss_type == name
    # each loss option reaches TRL under its own name, with a value other than TRL's default
    options = {"importance_sampling_level": "sequence", "off_policy_mask_threshold": 0.5,
               "use_bias_correction_kl": False, "sapo_temperature_pos": 0.7, "sapo_temperature_neg": 1.2,
               "vespo_k_pos": 1.5, "vespo_lambda_pos": 2.5, "vespo_k_neg": 2.5, "vespo_lambda_neg": 1.5,
               "top_entropy_quantile": 0.3, "entropy_coef": 0.02, "use_adaptive_entropy": True,
               "entropy_coef_min": 0.01, "entropy_coef_max": 0.4, "entropy_coef_delta": 0.003, "entropy_target": 0.5}
    cfg = config_from_dict({**base, "grpo": {"loss_type": "grpo", **options}}, registry=core_registry)
    args, defaults = trl.GRPOConfig(**grpo_config_kwargs(cfg)), trl.GRPOConfig(output_dir="x", use_cpu=True, bf16=False)
    for key, value in options.items():
        assert getattr(args, key) == value != getattr(defaults, key), key
    cfg.grpo.loss_type = "seq_mean"  # a plugin's loss type: TRL has no such loss
    with pytest.raises(ConfigError, match=r"^<dict>: grpo\.loss_type: the trl trainer backend runs TRL's loss types "
                                          r"\(grpo, .*\), not 'seq_mean'$"):
        grpo_config_kwargs(cfg)


def test_no_trl_equivalent_names_only_the_keys_the_user_set(core_registry: Any) -> None:
    from grpo_core.config import config_from_dict
    from grpo_core.trainer_backends.trl_mapping import NO_TRL_EQUIVALENT, no_trl_equivalent

    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "trainer": {"backend": "trl"},
            "rewards": {"a": {"use": "core_len"}}}
    assert no_trl_equivalent(config_from_dict(base, registry=core_registry)) == {}
    chosen = {"grpo": {"share_prompts": True}, "logging": {"sample_every": 5}, "model": {"name_or_path": "m",
              "mlp_chunk_tokens": 0}}
    cfg = config_from_dict({**base, **chosen}, registry=core_registry)  # set, even to the default: said
    assert no_trl_equivalent(cfg) == {k: NO_TRL_EQUIVALENT[k] for k in
                                      ("model.mlp_chunk_tokens", "grpo.share_prompts", "logging.sample_every")}


def test_an_adapter_push_is_said_to_have_no_trl_equivalent(core_registry: Any, monkeypatch: Any) -> None:
    import grpo_core.generation.vllm.support as support
    from grpo_core.config import config_from_dict
    from grpo_core.trainer_backends.trl_mapping import no_trl_equivalent

    monkeypatch.setattr(support, "vllm_available", lambda: True)
    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "trainer": {"backend": "trl"},
            "rewards": {"a": {"use": "core_len"}}, "lora": {"enabled": True}}
    for push, said in (("merged", {}), ("adapter", {"generation.vllm_lora_push": "\"adapter\": TRL merges the "
                                                    "adapter into the weights it sends to vLLM (\"merged\")"})):
        cfg = config_from_dict({**base, "generation": {"backend": "vllm", "vllm_lora_push": push}},
                               registry=core_registry)
        assert no_trl_equivalent(cfg) == said


def test_trainer_backends_are_registered_and_checked(core_registry: Any) -> None:
    from grpo_core.config import config_from_dict
    from grpo_rewards import ConfigError

    assert {"grpo_core", "trl"} <= set(core_registry.trainer_backends)
    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "rewards": {"a": {"use": "core_len"}}}
    assert config_from_dict(base, registry=core_registry).trainer.backend == "grpo_core"
    with pytest.raises(ConfigError) as info:
        config_from_dict({**base, "trainer": {"backend": "trll"}}, registry=core_registry)
    assert str(info.value).startswith("<dict>: trainer.backend: unknown trainer backend 'trll'; did you mean 'trl'?")


def test_every_key_has_its_trl_mapping_documented() -> None:
    from grpo_core.config import SECTIONS
    from grpo_core.trainer_backends.trl_mapping import NO_TRL_EQUIVALENT

    text = DOCS.read_text()
    section = text[text.index("## The TRL backend"):]
    section = section[: section.index("\n## ", 1) if "\n## " in section[1:] else len(section)]
    keys = [f"{name}.{f.name}" for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
    unclassified = [k for k in keys if f"`{k}`" not in section]
    assert not unclassified, (f"say how the trl backend treats {unclassified} in docs/run-config.md's TRL section "
                              "(and in trl_mapping.NO_TRL_EQUIVALENT when TRL has no equivalent)")
    assert set(NO_TRL_EQUIVALENT) <= set(keys)
    listed = section[section.index("### No TRL equivalent"):]
    assert not [k for k in NO_TRL_EQUIVALENT if f"`{k}`" not in listed]


def test_the_trl_backend_holds_its_run_folder_from_python(tiny_model_dir: Path, tmp_path: Path,
                                                          core_registry: Any) -> None:
    from grpo_core.config import load_config
    from grpo_core.run_folder.checkpoints import RunFolderError
    from grpo_core.run_folder.lock import is_held
    from grpo_core.trainer_backends.trl_backend import TRLBackend
    from tests.core.test_run_folder_ownership import holder

    cfg = load_config(_write_run(tmp_path, tiny_model_dir), registry=core_registry)
    backend = TRLBackend(cfg, registry=core_registry)
    trained = []
    # TRL's loop itself is not the point here: whether the folder is held while it runs is
    backend.trainer.train = lambda **kwargs: trained.append(is_held(tmp_path / "run"))
    proc = holder(tmp_path, tmp_path / "run")
    try:
        with pytest.raises(RunFolderError, match=f"is being written by another run \\(pid {proc.pid} on"):
            backend.train()
        assert not trained and not (tmp_path / "run" / "model").exists()
    finally:
        proc.kill()
        proc.wait()
    backend.train()  # the folder free again: it trains, and holds the folder while it does
    assert trained == [True] and not is_held(tmp_path / "run")
