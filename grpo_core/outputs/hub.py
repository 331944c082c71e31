"""Pushing a run to the Hugging Face Hub: ``[hub] push_to_hub = true``, with transformers' names and meanings.

``hub_model_id`` names the repo (``name`` in the token's namespace, or ``org/name``; default: the run folder's
name), ``hub_private_repo`` makes a new repo private (ignored for an existing one), ``hub_token`` is the token
(default: ``HF_TOKEN`` or the one ``hf auth login`` saved), ``hub_revision`` a branch to push to (made when
missing), and ``hub_strategy`` says when (transformers' ``HubStrategy``):

* ``"end"``: once, when training ends;
* ``"every_save"``: also at every checkpoint (``[checkpoint] every``), the model as it is then;
* ``"checkpoint"``: as ``every_save``, plus the newest checkpoint in ``last-checkpoint/`` (to resume from);
* ``"all_checkpoints"``: as ``every_save``, plus every checkpoint under its own name (``checkpoints/step-...``).

What is pushed is ``RUN_DIR/model`` (the adapter or the full model, and the tokenizer, as ``save_model`` writes
them) with a model card (:mod:`grpo_core.outputs.model_card`) and the curves image; each push is one
``huggingface_hub.upload_folder`` commit. The repo is created (``create_repo(exist_ok=True)``) at the first push.

Failures: what can be known before training (huggingface_hub missing, no token, a malformed repo id: the
config's check) is refused before the model loads (:func:`hub_problems`). A push during training that fails is
one warning line and training goes on; the push at the end that fails raises a
:class:`~grpo_rewards.errors.ServiceError` (one line, exit 1) after everything local is written: the run folder
stays whole, and ``push_to_hub(run_dir, cfg)`` can push it again later. Pushes run on the main process only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_core.config import as_run_config
from grpo_core.outputs.model_card import write_model_card
from grpo_core.run_folder.layout import CURVES_FILE, METRICS_FILE, MODEL_DIR, read_jsonl
from grpo_rewards.errors import ConfigError, Problem, ServiceError

LAST_CHECKPOINT = "last-checkpoint"


def token_of(hub: Any) -> str | None:
    """The token a push uses: ``hub_token``, else huggingface_hub's (``HF_TOKEN``, then the saved login)."""
    if hub.hub_token:
        return hub.hub_token
    from huggingface_hub import get_token

    return get_token()


def hub_problems(cfg: Any) -> list[tuple[str, str]]:
    """``(key, why)`` for what would make the pushes fail and is known before training."""
    hub = cfg.hub
    if not hub.push_to_hub:
        return []
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return [("hub.push_to_hub", "needs huggingface_hub (pip install huggingface_hub)")]
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return [("hub.push_to_hub", "the hub is switched off (HF_HUB_OFFLINE is set)")]
    if not token_of(hub):
        return [("hub.hub_token", "no token to push with: set HF_TOKEN, run `hf auth login`, or set hub_token")]
    return []


def check_hub(cfg: Any) -> None:
    """Raise ``ConfigError`` (one line per problem, naming the key) for :func:`hub_problems`."""
    problems = hub_problems(cfg)
    if problems:
        raise ConfigError([Problem(cfg.path, None, key, why) for key, why in problems])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class HubPusher:
    """The pushes of one run (see the module docs); ``HubPusher.of(cfg)`` is None when the run does not push."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.hub = cfg.hub
        self.repo_id: str | None = None

    @classmethod
    def of(cls, cfg: Any) -> HubPusher | None:
        return cls(cfg) if cfg.hub.push_to_hub else None

    def _api(self) -> Any:
        from huggingface_hub import HfApi

        return HfApi(token=self.hub.hub_token or None)

    def repo(self) -> str:
        """The repo's full id, creating the repo (and the ``hub_revision`` branch) the first time."""
        if self.repo_id is None:
            api = self._api()
            name = self.hub.hub_model_id or Path(self.cfg.logging.output_dir).resolve().name
            url = api.create_repo(name, private=self.hub.hub_private_repo, exist_ok=True, repo_type="model")
            if self.hub.hub_revision:
                api.create_branch(url.repo_id, branch=self.hub.hub_revision, exist_ok=True)
            self.repo_id = url.repo_id
        return self.repo_id

    def _upload(self, folder: Path, message: str, path_in_repo: str | None = None) -> Any:
        return self._api().upload_folder(repo_id=self.repo(), folder_path=folder, path_in_repo=path_in_repo,
                                         commit_message=message, revision=self.hub.hub_revision or None,
                                         ignore_patterns=[".*", "*.tmp"])

    def push_model(self, run_dir: Path, metrics: dict[str, Any], message: str) -> Any:
        """Write the model card into ``RUN_DIR/model`` and upload that folder (one commit)."""
        model_dir = Path(run_dir) / MODEL_DIR
        curves = Path(run_dir) / CURVES_FILE
        write_model_card(model_dir, self.cfg, metrics, curves if curves.is_file() else None, repo_id=self.repo())
        return self._upload(model_dir, message)

    def on_save(self, run_dir: str | Path, step: int, checkpoint: str | Path | None,
                save_model: Callable[[Path], Any] | None, metrics: dict[str, Any]) -> None:
        """A checkpoint was written: push per ``hub_strategy`` (nothing for ``"end"``). ``save_model(dir)`` writes
        the model as it is now (None: the model cannot be written here, e.g. sharded). A failure is one warning."""
        strategy = self.hub.hub_strategy
        if strategy == "end":
            return
        run_dir = Path(run_dir)
        message = f"Training in progress, step {step}"
        try:
            if save_model is not None:
                save_model(run_dir / MODEL_DIR)
                self.push_model(run_dir, metrics, message)
            if checkpoint is not None and strategy in ("checkpoint", "all_checkpoints"):
                checkpoint = Path(checkpoint)
                where = LAST_CHECKPOINT if strategy == "checkpoint" else f"checkpoints/{checkpoint.name}"
                self._upload(checkpoint, message + ", checkpoint", path_in_repo=where)
        except Exception as exc:  # noqa: BLE001 (the hub, the network: training goes on)
            print(f"warning: hub.push_to_hub: the push at step {step} failed ({_first_line(exc)}); training goes on",
                  file=sys.stderr)

    def on_end(self, run_dir: str | Path, metrics: dict[str, Any]) -> str:
        """Training ended: push the final model with its card; returns the repo's URL. A failure raises
        ``ServiceError`` (one line) naming the run folder, which is left as it is."""
        try:
            self.push_model(Path(run_dir), metrics, "End of training")
            from huggingface_hub import constants

            return f"{constants.ENDPOINT}/{self.repo_id}"
        except Exception as exc:  # noqa: BLE001 (one line for any failure of the hub or the network)
            where = self.repo_id or self.hub.hub_model_id or Path(self.cfg.logging.output_dir).name
            raise ServiceError(f"hub.push_to_hub: pushing {Path(run_dir) / MODEL_DIR} to {where} failed "
                               f"({_first_line(exc)}); the run folder {run_dir} is complete: push it again "
                               "with grpo_core.outputs.hub.push_to_hub") from exc


def push_to_hub(run_dir: str | Path, config: Any) -> str:
    """Push a finished run folder (its ``model/``, card and curves) as ``config``'s ``[hub]`` says; the URL."""
    cfg = as_run_config(config)
    check_hub(cfg)
    records = read_jsonl(Path(run_dir) / METRICS_FILE)
    return HubPusher(cfg).on_end(run_dir, records[-1] if records else {})
