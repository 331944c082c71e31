"""Every module path from before ``grpo_core`` had a folder per extension point still imports: it warns
with a DeprecationWarning and resolves to the module (or, for a folder, the names) that moved."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import tomllib
from pathlib import Path

import pytest

from grpo_core._aliases import MOVED

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"grpo_core.vllm", "grpo_core.backends"}  # folders: their aliases are folders of aliases

# What users typed before the move: the paths README.md, docs/*.md, examples/ and pyproject.toml named, and
# grpo_core's exports; each must still resolve, to the object now at its new home.
TYPED = {
    "grpo_core.vllm.server_worker.WeightLoader": "grpo_core.generation.vllm.server_worker.WeightLoader",
    "grpo_core.deepspeed_engine.deepspeed_config": "grpo_core.parallel.deepspeed.deepspeed_config",
    "grpo_core.backends.trl_backend.TRLBackend": "grpo_core.trainer_backends.trl_backend.TRLBackend",
    "grpo_core.cli_commands.grpo_register_commands": "grpo_core.cli.commands.grpo_register_commands",
    "grpo_core.advantages.group_advantages": "grpo_core.algorithm.advantages.group_advantages",
    "grpo_core.loss.grpo_loss": "grpo_core.algorithm.loss.grpo_loss",
    "grpo_core.models.load_model_and_tokenizer": "grpo_core.policy.models.load_model_and_tokenizer",
    "grpo_core.logprobs.completion_logprobs": "grpo_core.policy.logprobs.completion_logprobs",
    "grpo_core.fsdp.shard": "grpo_core.parallel.fsdp.shard",
    "grpo_core.generation.TransformersBackend": "grpo_core.generation.transformers_backend.TransformersBackend",
    "grpo_core.generation.Generation": "grpo_core.generation.transformers_backend.Generation",
    "grpo_core.cli.eval_command.cmd_eval": "grpo_core.cli.commands.eval.cmd_eval",
    "grpo_core.cli.eval_command.add_arguments": "grpo_core.cli.commands.eval.add_arguments",
    # grpo_core.cli.commands was one module before it was a folder of one module per command: its names stay
    "grpo_core.cli.commands.run_checks": "grpo_core.cli.checks.run_checks",
    "grpo_core.cli.commands.preflight": "grpo_core.cli.checks.preflight",
    "grpo_core.cli.commands.summary": "grpo_core.cli.checks.summary",
    "grpo_core.cli.commands.model_source_problem": "grpo_core.cli.checks.model_source_problem",
    "grpo_core.cli.commands.hub_dataset_problem": "grpo_core.cli.checks.hub_dataset_problem",
    "grpo_core.cli.commands.key_line": "grpo_core.cli.checks.key_line",
    "grpo_core.cli.commands.memory_estimate": "grpo_core.cli.commands.train.memory_estimate",
    "grpo_core.cli.commands.cmd_train": "grpo_core.cli.commands.train.cmd_train",
    "grpo_core.cli.commands.cmd_config_validate": "grpo_core.cli.commands.config.cmd_config_validate",
    "grpo_core.cli.commands.cmd_signal": "grpo_core.cli.commands.signal.cmd_signal",
    "grpo_core.cli.commands.cmd_plot": "grpo_core.cli.commands.plot.cmd_plot",
    "grpo_core.cli.commands.launch": "grpo_core.cli.launch.launch",
    "grpo_core.cli.commands.child_pids": "grpo_core.cli.launch.child_pids",
}


def forget(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Drop ``name`` (and its submodules) from sys.modules for this test, so that importing it runs it again."""
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, loaded)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_warns_and_resolves_to_the_moved_module(old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    new = importlib.import_module(MOVED[old])
    forget(monkeypatch, old)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: import {MOVED[old]}"):
        alias = importlib.import_module(old)
    if old in PACKAGES:
        assert alias is not new  # its own folder, so that its submodules are the aliases below
        assert all(getattr(alias, name) is getattr(new, name) for name in getattr(new, "__all__", []))
    else:
        assert alias is new and sys.modules[old] is new


@pytest.mark.parametrize("typed", sorted(TYPED))
def test_paths_users_typed_resolve_to_the_same_objects(typed: str) -> None:
    assert pkgutil.resolve_name(typed) is pkgutil.resolve_name(TYPED[typed])


def test_every_moved_file_has_an_alias_and_every_entry_point_imports() -> None:
    aliases = {p.relative_to(ROOT / "grpo_core" / "_aliases").with_suffix("") for p in
               (ROOT / "grpo_core" / "_aliases").rglob("*.py") if p.name != "__init__.py" or p.parent.name != "_aliases"}
    named = {"grpo_core." + ".".join(p.parts[:-1] if p.name == "__init__" else p.parts) for p in aliases}
    assert named == set(MOVED)
    for old in MOVED:  # the old file is gone, or the alias would never be found
        assert not (ROOT / Path(*old.split("."))).with_suffix(".py").exists()
        assert not (ROOT / Path(*old.split("."))).is_dir()
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    for target in groups["grpo"].values():
        assert importlib.import_module(target).__name__ == target
