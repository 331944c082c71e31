"""What a run hands to the outside beside its run folder: experiment trackers (:mod:`.trackers`, through
accelerate's tracking) and the Hugging Face Hub (:mod:`.hub`, with the model card of :mod:`.model_card`).

Each module imports its heavy packages inside its functions: validating a config stays cheap."""

from __future__ import annotations

from typing import Any

from grpo_core.outputs.hub import hub_problems
from grpo_core.outputs.trackers import KEY, tracker_problems
from grpo_rewards.errors import ConfigError, Problem


def output_problems(cfg: Any) -> list[Any]:
    """Why a run's trackers or pushes would fail, as ``Problem`` s naming their keys: known before anything
    loads (``grpo train`` and its ``--dry-run``, ``grpo config validate``; the trainers again when they start)."""
    return ([Problem(cfg.path, None, KEY, why) for why in tracker_problems(cfg.logging)]
            + [Problem(cfg.path, None, key, why) for key, why in hub_problems(cfg)])


def check_outputs(cfg: Any) -> None:
    """Raise ``ConfigError`` for :func:`output_problems`."""
    problems = output_problems(cfg)
    if problems:
        raise ConfigError(problems)


def deprecations(cfg: Any) -> list[str]:
    """The older spellings a config uses, each with its replacement (printed as warnings; they still work)."""
    table = cfg.raw.get("logging") if isinstance(cfg.raw.get("logging"), dict) else {}
    replaced = {"wandb": 'report_to = ["wandb"]', "tensorboard": 'report_to = ["tensorboard"]',
                "wandb_project": "project"}
    return [f"{cfg.path}: logging.{key} is deprecated: use logging.{new}" for key, new in replaced.items()
            if key in table]
