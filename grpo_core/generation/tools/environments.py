"""TRL's ``environment_factory``: one stateful environment per rollout, its public methods the rollout's tools.

As in TRL 1.16 (``GRPOTrainer.__init__`` and ``_generate_and_score_completions``):

* ``factory()`` makes an environment; it must have a callable ``reset``. Its tools are the functions of its
  class that are public and neither ``reset`` nor ``get_reward`` (listed on the class, so properties are not
  evaluated), bound to the instance: each needs type hints and a Google-style docstring like any tool.
* Each rollout (each completion of each group) gets an instance of its own from a pool that grows to the
  largest batch seen and is reused across batches ("construct once, reset often"); before generation each is
  ``reset(**row)`` with its row's columns. A string ``reset`` returns is appended to the prompt's last user
  message (to the prompt itself when it is text), for that rollout alone.
* A rollout's tool calls run on its own instance, in the order the model wrote them (:meth:`ToolSet.bind
  <grpo_core.generation.tools.toolset.ToolSet.bind>`): state is kept within a rollout and never shared across
  rollouts, the rollouts of one group included.
* Rewards get the batch's instances as the column ``environments`` (one per completion, in order). An
  environment with ``get_reward()`` owns a reward too: :meth:`EnvironmentPool.reward` scores each rollout with
  it (weight 1, named after the class, beside the run's rewards).

One factory for every row; TRL's dict of factories (an ``environment`` column choosing one per row) is not
offered.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from grpo_rewards.errors import UserError

CONTROL_METHODS = ("reset", "get_reward")


def environment_methods(instance: Any) -> list[Callable[..., Any]]:
    """The environment's tools: its class's public functions but ``reset`` and ``get_reward``, bound to it."""
    return [getattr(instance, name) for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
            if name not in CONTROL_METHODS and not name.startswith("_")]


class EnvironmentPool:
    """The environments of a run's rollouts, made by one factory (module docs)."""

    def __init__(self, factory: Callable[[], Any]):
        if isinstance(factory, dict):
            raise UserError("environment_factory: a dict of environments (chosen per row by an `environment` "
                            "column) is not offered; pass one factory")
        if not callable(factory):
            raise UserError(f"environment_factory must be a callable returning an environment, got "
                            f"{type(factory).__name__}")
        self.factory = factory
        probe = factory()
        if not callable(getattr(probe, "reset", None)):
            raise UserError("environment_factory: each environment must define a callable `reset` (it is called "
                            "with the row's columns before each rollout)")
        self.cls = type(probe)
        self.pool: list[Any] = [probe]  # the probe is the first rollout's instance
        self.owns_reward = callable(getattr(probe, "get_reward", None))

    def tools(self) -> list[Callable[..., Any]]:
        """The tools the prompt lists: the first instance's methods (each rollout calls its own instance's)."""
        return environment_methods(self.pool[0])

    def draw(self, n: int) -> list[Any]:
        """One instance per rollout of a batch of ``n``: the pool's first ``n``, made as needed."""
        while len(self.pool) < n:
            self.pool.append(self.factory())
        return self.pool[:n]

    @staticmethod
    def reset(instances: list[Any], rows: list[dict[str, Any]]) -> list[Any]:
        """Each instance ``reset(**row)`` with its rollout's row; what each returned (``None`` or text)."""
        return [instance.reset(**row) for instance, row in zip(instances, rows, strict=True)]

    @staticmethod
    def bindings(instances: list[Any]) -> list[dict[str, Callable[..., Any]]]:
        """Per rollout, its tool names bound to its own instance."""
        return [{method.__name__: method for method in environment_methods(instance)} for instance in instances]

    def reward(self) -> Callable[..., list[float | None]]:
        """The reward an environment with ``get_reward`` owns: each rollout's instance scores it (TRL's
        ``get_reward(environments, **kwargs)``), named after the environment's class."""
        cls = self.cls

        def get_reward(completions: list[Any], environments: list[Any] | None = None, **_: Any
                       ) -> list[float | None]:
            if environments is None or len(environments) != len(completions):
                raise ValueError(f"{cls.__name__}.get_reward scores the environments of a batch with tools; this "
                                 "batch has none")
            return [e.get_reward() if type(e) is cls else None for e in environments]

        get_reward.__name__ = cls.__name__
        return get_reward


def with_observation(prompt: Any, observation: str) -> Any:
    """``prompt`` with ``observation`` appended to its last user message (TRL's rule; to the text itself when the
    prompt is text); the row's own prompt is left as it is."""
    if isinstance(prompt, str):
        return prompt + observation
    if not isinstance(prompt, list) or not prompt or not isinstance(prompt[-1], dict):
        raise UserError("environment_factory: reset() returned text to add to the prompt, but the row's prompt is "
                        "neither text nor chat messages")
    last = prompt[-1]
    content = last.get("content", "")
    if isinstance(content, list):
        content = [*content, {"type": "text", "text": observation}]
    else:
        content = f"{content or ''}{observation}"
    return [*prompt[:-1], {**last, "content": content}]
