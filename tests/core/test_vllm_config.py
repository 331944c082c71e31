"""`[generation] backend = "vllm"` and the sampler-mismatch keys in `grpo config validate`: each missing
piece or unservable setting is one `file:line: key: what` line, with or without vLLM installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import grpo_core.generation.vllm.support as support
from grpo_rewards import ConfigError
from grpo_rewards.command_line import main

BASE = """\
[model]
name_or_path = "some/model"

[data]
source = "hub/x"

[generation]
{generation}

[quantization]
{quantization}

[rewards.fmt]
use = "xml_count"
"""


def validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], generation: str, quantization: str = ""
             ) -> tuple[int, list[str], Path]:
    path = tmp_path / "run.toml"
    path.write_text(BASE.format(generation=generation, quantization=quantization))
    code = main(["config", "validate", str(path)])
    return code, capsys.readouterr().err.splitlines(), path


def test_vllm_not_installed_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: False)
    code, err, path = validate(tmp_path, capsys, 'backend = "vllm"')
    assert code == 2
    assert err == [f"{path}:8: generation.backend: 'vllm' needs the vllm package, not installed in this "
                   f"environment ({support.INSTALL_HINT})"]


def test_vllm_installed_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: True)
    code, err, _ = validate(tmp_path, capsys, 'backend = "vllm"\nmin_p = 0.05\nstop = ["</answer>"]')
    assert (code, err) == (0, [])


def test_settings_vllm_cannot_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: True)
    generation = ('backend = "vllm"\nvllm_gpu_memory_utilization = 1.5\nvllm_sleep_level = 3\n'
                  'vllm_server_url = "localhost:8000"')
    code, err, path = validate(tmp_path, capsys, generation, "load_in_4bit = true")
    assert code == 2
    assert f"{path}:9: generation.vllm_gpu_memory_utilization: must be in (0, 1], got 1.5" in err
    assert f"{path}:10: generation.vllm_sleep_level: must be 0, 1 or 2, got 3" in err
    assert f"{path}:11: generation.vllm_server_url: expected http://host:port, got 'localhost:8000'" in err
    assert any(line.startswith(f"{path}:14: quantization.load_in_4bit: backend = \"vllm\" serves") for line in err)


def test_vllm_only_keys_with_the_transformers_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, path = validate(tmp_path, capsys, 'min_p = 0.1\nstop = ["x"]')
    assert code == 2
    assert err == [f'{path}:8: generation.min_p: needs backend = "vllm" (the transformers backend does not apply it)',
                   f'{path}:9: generation.stop: stop strings need backend = "vllm" (the transformers backend stops '
                   "at EOS only)"]


@pytest.mark.parametrize("generation, expected", [
    ('importance_sampling = "sequence"', "generation.importance_sampling: must be one of none, token_truncate, "
                                         "token_mask, sequence_truncate, sequence_mask, got 'sequence'; did you "
                                         "mean 'sequence_mask'?"),
    ('importance_sampling = "token_truncate"\nimportance_sampling_max = 0',
     "generation.importance_sampling_max: must be > 0, got 0.0"),
    ('importance_sampling = "token_truncate"\nimportance_sampling_min = 2.0\nimportance_sampling_max = 1.0',
     "generation.importance_sampling_min: must be >= 0 and below importance_sampling_max (1.0), got 2.0"),
    ('min_p = 1.5', "generation.min_p: must be in [0, 1], got 1.5"),
])
def test_importance_sampling_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str], generation: str,
                                  expected: str) -> None:
    code, err, _ = validate(tmp_path, capsys, generation)
    assert code == 2
    assert any(expected in line for line in err), err


def test_truncate_needs_a_bound(core_registry: Any) -> None:
    from grpo_core.config import config_from_dict

    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "rewards": {"a": {"use": "core_len"}}}
    with pytest.raises(ConfigError, match="a \\*_truncate rule needs importance_sampling_min or _max"):
        config_from_dict({**base, "generation": {"importance_sampling": "token_truncate",
                                                 "importance_sampling_max": None}}, registry=core_registry)
    cfg = config_from_dict({**base, "generation": {"importance_sampling": "sequence_mask",
                                                   "importance_sampling_max": None}}, registry=core_registry)
    assert cfg.generation.importance_sampling_max is None  # masking without a cap is allowed (as in TRL)


def test_server_mode_needs_no_vllm_in_the_training_process(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: False)
    code, err, _ = validate(tmp_path, capsys, 'backend = "vllm"\nvllm_mode = "server"\nvllm_server_port = 8123\n'
                                              'vllm_server_timeout = 30')
    assert (code, err) == (0, [])


def test_server_keys_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: True)
    generation = ('backend = "vllm"\nvllm_mode = "serve"\nvllm_server_host = "http://x"\nvllm_server_port = 70000\n'
                  'vllm_server_timeout = 0')
    code, err, path = validate(tmp_path, capsys, generation)
    assert code == 2
    assert err == [f"{path}:9: generation.vllm_mode: must be one of colocate, server, got 'serve'; did you mean "
                   "'server'?",
                   f"{path}:10: generation.vllm_server_host: expected a host name or address, got 'http://x'",
                   f"{path}:11: generation.vllm_server_port: must be in 1..65535, got 70000",
                   f"{path}:12: generation.vllm_server_timeout: must be > 0 (seconds), got 0.0"]


def test_server_only_and_colocated_only_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: True)
    code, err, path = validate(tmp_path, capsys, 'backend = "vllm"\nvllm_server_url = "http://127.0.0.1:8000"')
    assert code == 2
    assert err == [f'{path}:9: generation.vllm_server_url: read only with vllm_mode = "server" (the colocated engine '
                   'has no URL): set vllm_mode = "server" or remove it']
    code, err, path = validate(tmp_path, capsys, 'backend = "vllm"\nvllm_mode = "server"\nvllm_sleep_level = 1')
    assert code == 2
    assert err == [f"{path}:10: generation.vllm_sleep_level: sleep mode is the colocated engine's; with vllm_mode = "
                   '"server" the server keeps its own memory: set it to 0']


@pytest.mark.parametrize("fields, url", [
    ({}, "http://127.0.0.1:8000"),
    ({"vllm_server_host": "::1", "vllm_server_port": 9001}, "http://[::1]:9001"),
    ({"vllm_server_host": "ignored", "vllm_server_url": "https://gpu-box:8443/"}, "https://gpu-box:8443"),
])
def test_server_url(fields: dict[str, Any], url: str) -> None:
    from grpo_core.config import GenerationConfig

    assert support.server_url(GenerationConfig(**fields)) == url


@pytest.mark.parametrize("extra, expected", [
    ("", '9: generation.vllm_lora_push: "adapter" serves a LoRA adapter, and this run trains every weight '
         '([lora] enabled = false): set it to "merged" (the default)'),
    ("[lora]\nenabled = true\nr = 1024\n",
     '9: generation.vllm_lora_push: "adapter": vLLM cannot serve this adapter (rank 1024 is above vLLM\'s largest '
     'LoRA rank (512)); set it to "merged"'),
], ids=["full-fine-tuning", "rank"])
def test_adapter_push_needs_an_adapter_vllm_serves(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch, extra: str, expected: str) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: True)
    path = tmp_path / "run.toml"
    path.write_text(BASE.format(generation='backend = "vllm"\nvllm_lora_push = "adapter"', quantization="") + extra)
    assert main(["config", "validate", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"{path}:{expected}"]


def test_adapter_push_choices_and_combinations(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "vllm_available", lambda: True)
    lora = "[lora]\nenabled = true\n"
    for generation, expected in [
        ('vllm_lora_push = "adapters"', "generation.vllm_lora_push: must be one of merged, adapter, got 'adapters'; "
                                        "did you mean 'adapter'?"),
        ('vllm_lora_push = "adapter"\nvllm_mode = "server"',
         'generation.vllm_lora_push: "adapter" is the colocated engine\'s; a server gets merged weights: set it to '
         '"merged" or vllm_mode = "colocate"'),
        ('vllm_lora_push = "adapter"\nvllm_sleep_level = 2',
         'generation.vllm_lora_push: "adapter" keeps the checkpoint\'s base weights in the engine, which sleep level '
         '2 drops: set vllm_sleep_level to 0 or 1'),
    ]:
        path = tmp_path / "run.toml"
        path.write_text(BASE.format(generation=f'backend = "vllm"\n{generation}', quantization="") + lora)
        assert main(["config", "validate", str(path)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert [line.split(": ", 1)[1] for line in err] == [expected], err
    path.write_text(BASE.format(generation='backend = "vllm"\nvllm_lora_push = "adapter"', quantization="") + lora)
    assert main(["config", "validate", str(path)]) == 0


def test_adapter_push_reads_a_saved_adapters_config(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setattr(support, "vllm_available", lambda: True)
    saved = tmp_path / "adapter"
    saved.mkdir()
    (saved / "adapter_model.safetensors").write_bytes(b"")
    (saved / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": ["q_proj"],
        "use_dora": True, "modules_to_save": ["lm_head"]}))
    path = tmp_path / "run.toml"
    path.write_text(BASE.format(generation='backend = "vllm"\nvllm_lora_push = "adapter"', quantization="")
                    .replace('name_or_path = "some/model"', f'name_or_path = "some/model"\nadapter = "{saved}"'))
    assert main(["config", "validate", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f'{path}:10: generation.vllm_lora_push: "adapter": vLLM cannot serve this adapter '
                   "(modules_to_save = ['lm_head']: vLLM serves LoRA layers only (those modules are trained whole)); "
                   'set it to "merged"',
                   f'{path}:10: generation.vllm_lora_push: "adapter": vLLM cannot serve this adapter '
                   '(use_dora: vLLM does not serve DoRA); set it to "merged"']
