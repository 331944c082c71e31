"""``[model] adapter``: a run starts from a saved LoRA adapter (its weights are the starting point, its LoRA
config wins; a ``[lora]`` key that disagrees is an error), and a ``name_or_path`` naming an adapter folder
gets the one-line hint to use ``model.adapter``."""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from grpo_rewards.tomlfile import ConfigError  # noqa: E402
from tests.core.conftest import arithmetic_rows, tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory, arithmetic_model_dir):
    """A tiny model and a LoRA adapter trained on it for two steps (``run/model``)."""
    from grpo_core import Trainer, config_from_dict

    tmp = tmp_path_factory.mktemp("adapter_start")
    rows = arithmetic_rows(40)
    model_dir = arithmetic_model_dir
    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:8]))
    cfg = config_from_dict(_cfg(model_dir, data, tmp / "first", lora={"enabled": True, "r": 4, "alpha": 8,
                                                                       "target_modules": ["q_proj", "v_proj"]}))
    Trainer(cfg).train()
    return model_dir, data, tmp / "first" / "model"


def _cfg(model_dir, data, out, *, model=None, lora=None, steps=2):
    cfg = tiny_run(model_dir, out, model=model or {}, data={"source": str(data), "chat_template": False},
                   grpo={"learning_rate": 5e-2, "max_steps": steps}, rewards={"len": {"use": "xml_count"}})
    if lora is not None:
        cfg["lora"] = lora
    return cfg


def _saved_lora(adapter_dir):
    from safetensors.torch import load_file

    return load_file(str(adapter_dir / "adapter_model.safetensors"))


def _lora_of(model):
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model)


def test_second_run_starts_from_the_saved_adapter_and_trains_it(trained, tmp_path, capsys):
    from grpo_core import Trainer, config_from_dict

    model_dir, data, adapter = trained
    cfg = config_from_dict(_cfg(model_dir, data, tmp_path / "second", model={"adapter": str(adapter)}))
    assert cfg.lora.enabled and cfg.lora.r == 4 and cfg.lora.alpha == 8  # the adapter's config, no [lora] given
    assert cfg.lora.target_modules == ["q_proj", "v_proj"]
    capsys.readouterr()
    trainer = Trainer(cfg)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("adapter loaded: ")]
    tensors = len(_saved_lora(adapter))  # every saved weight tensor trains
    assert said == [f"adapter loaded: {adapter} (LoRA r=4, {tensors} weight tensors training, trained on {model_dir})"]
    saved, start = _saved_lora(adapter), _lora_of(trainer.model)
    assert set(saved) == set(start) and any(v.abs().sum() > 0 for k, v in saved.items() if "lora_B" in k)
    for key, value in saved.items():  # lora_B is zero at a fresh start: equal weights mean the adapter was loaded
        torch.testing.assert_close(start[key], value, rtol=0, atol=0)
    assert [n for n, p in trainer.model.named_parameters() if p.requires_grad]  # trainable, not inference mode
    trainer.train()
    after = _lora_of(trainer.model)
    assert any(not torch.equal(after[k], saved[k]) for k in saved)  # and training moved it on


def test_matching_lora_keys_are_fine_and_a_mismatch_is_one_line(trained, tmp_path):
    from grpo_core import config_from_dict

    model_dir, data, adapter = trained
    same = config_from_dict(_cfg(model_dir, data, tmp_path / "a", model={"adapter": str(adapter)},
                                 lora={"r": 4, "target_modules": ["v_proj", "q_proj"]}))
    assert same.lora.r == 4
    with pytest.raises(ConfigError) as err:
        config_from_dict(_cfg(model_dir, data, tmp_path / "b", model={"adapter": str(adapter)},
                             lora={"enabled": True, "r": 8}))
    assert str(err.value) == (f"<dict>: lora.r: 8 differs from the adapter's r = 4 ({adapter}/adapter_config.json); "
                              "leave it out to use the adapter's")


def test_adapter_folder_problems(trained, tmp_path):
    from grpo_core import config_from_dict

    model_dir, data, adapter = trained
    empty = tmp_path / "empty"
    empty.mkdir()
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    shutil.copy(adapter / "adapter_config.json", no_weights)
    cases = {str(tmp_path / "nope"): "model.adapter: folder not found",
             str(empty): "has no adapter_config.json: not a saved PEFT adapter",
             str(no_weights): "has no adapter weights (adapter_model.safetensors or adapter_model.bin)"}
    for path, message in cases.items():
        with pytest.raises(ConfigError) as err:
            config_from_dict(_cfg(model_dir, data, tmp_path / "r", model={"adapter": path}))
        assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_name_or_path_at_an_adapter_folder_gets_the_hint(trained, tmp_path):
    from grpo_core import config_from_dict

    model_dir, data, adapter = trained
    with pytest.raises(ConfigError) as err:
        config_from_dict(_cfg(adapter, data, tmp_path / "r"))
    assert str(err.value) == (f"<dict>: model.name_or_path: {adapter} is a LoRA adapter, not a model: set "
                              f"model.adapter = \"{adapter}\" and model.name_or_path = \"{model_dir}\" (the adapter's "
                              "base model)")
