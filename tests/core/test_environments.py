"""TRL's ``environment_factory`` (grpo_core/generation/tools/environments.py): one stateful environment per rollout,
its methods the tools, its state the rollout's alone, the rollouts of one group included; rewards read the
instances as TRL passes them (``environments``); ``reset`` text joins its rollout's prompt; ``get_reward`` is one
more reward. The trainer-level tests run a tiny model whose turns are scripted (as TRL's own test patches
``generate``), so which rollout calls what is known."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch
from test_multi_turn_rollout import Scripted, _prompts
from tool_models import tool_calling_model, tool_tokenizer

from grpo_core.generation.multi_turn import RolloutLimits, multi_turn_rollout
from grpo_core.generation.tools.environments import EnvironmentPool, environment_methods, with_observation
from grpo_core.generation.tools.toolset import ToolSet
from grpo_rewards.errors import UserError

INC = '{{"name": "increment", "arguments": {{"step": {}}}}}'


def _calls(*bodies: str) -> str:
    return "".join(f"<tool_call>\n{b}\n</tool_call>" for b in bodies) + "<|im_end|>"


class Counter:
    """TRL's test environment (test_train_with_environment_factory): a counter, reset per rollout."""

    made = itertools.count()

    def __init__(self) -> None:
        self.number = next(Counter.made)
        self.resets: list[dict[str, Any]] = []

    def reset(self, **row: Any) -> None:
        self.counter = 0
        self.resets.append(row)

    def increment(self, step: int) -> int:
        """Increment the internal counter.

        Args:
            step: Value to add to the counter.
        """
        self.counter += step
        return self.counter

    def _private(self) -> None:  # not a tool
        raise AssertionError

    @property
    def doubled(self) -> int:  # a property is never evaluated to list the tools
        raise AssertionError("evaluated")


def test_the_tools_are_the_public_methods_and_reset_is_required() -> None:
    pool = EnvironmentPool(Counter)
    assert [m.__name__ for m in pool.tools()] == ["increment"] and not pool.owns_reward
    assert pool.draw(3)[0] is pool.pool[0] and len(pool.pool) == 3 and pool.draw(2) == pool.pool[:2]
    with pytest.raises(UserError, match="reset"):
        EnvironmentPool(object)
    with pytest.raises(UserError, match="dict"):
        EnvironmentPool({"counter": Counter})
    assert [m.__name__ for m in environment_methods(Counter())] == ["increment"]


def test_two_rollouts_of_one_group_keep_their_own_state_and_calls_run_in_order() -> None:
    """Rollout 0 increments by 1 then 2 in one turn and by 10 in the next; rollout 1 (the same prompt) by 5:
    each sees only its own counter, and a turn's calls run in the order written."""
    tok = tool_tokenizer()
    pool = EnvironmentPool(Counter)
    envs = pool.draw(3)
    pool.reset(envs, [{"prompt": "p"}] * 3)
    tools = ToolSet(pool.tools())
    tools.bind(pool.bindings(envs))
    sampler = Scripted(tok, {0: [_calls(INC.format(1), INC.format(2)), _calls(INC.format(10)), "done<|im_end|>"],
                             1: [_calls(INC.format(5)), "done<|im_end|>"], 2: ["done<|im_end|>"]})
    rollout = multi_turn_rollout(_prompts(tok, 3), sampler, tok, tools, eos_ids=[tok.eos_token_id],
                                 limits=RolloutLimits(600, 4096))
    answers = [[m["content"] for m in c if m["role"] == "tool"] for c in rollout.conversations]
    assert answers == [["1", "3", "13"], ["5"], []]
    assert [e.counter for e in envs] == [13, 5, 0]


def test_a_hung_call_stops_its_rollouts_later_calls_only() -> None:
    import threading

    release = threading.Event()

    class Slow(Counter):
        def wait(self, step: int) -> int:
            """Wait.

            Args:
                step: ignored
            """
            release.wait()
            return 0

    pool = EnvironmentPool(Slow)
    envs = pool.draw(2)
    pool.reset(envs, [{}, {}])
    tools = ToolSet(pool.tools(), timeout_s=0.3)
    tools.bind(pool.bindings(envs))
    from grpo_core.generation.tools.formats import parse_tool_calls

    calls = parse_tool_calls(_calls('{"name": "wait", "arguments": {"step": 1}}', INC.format(1)) +
                             _calls(INC.format(4)))
    try:
        results = tools.run(calls, rows=[0, 0, 1])
    finally:
        release.set()
    assert [r.content for r in results] == ["error: the tool timed out after 0.3 s"] * 2 + ["4"]
    assert envs[0].counter == 0  # the call after the hung one never ran


def test_an_observation_joins_the_last_user_message() -> None:
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": "Count."}]
    assert with_observation(prompt, " Start at 3.") == [prompt[0], {"role": "user", "content": "Count. Start at 3."}]
    assert prompt[1]["content"] == "Count."  # the row is left as it was
    assert with_observation("Count.", " Go.") == "Count. Go."


# ---- the trainer -------------------------------------------------------------------------------------------------

SCRIPT = [_calls(INC.format(1), INC.format(1)), _calls(INC.format(5)), "no tools<|im_end|>",
          _calls('{"name": "decrement", "arguments": {"step": 2}}')]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tool_calling_model(tmp_path_factory.mktemp("tool_model"), tool_tokenizer())


def _script(trainer: Any, seen_prompts: list[list[str]]) -> None:
    """The backend's turns scripted: the first turn of a group writes SCRIPT's rows, every later one answers."""
    tok, original = trainer.tokenizer, trainer.backend.generate

    def turn(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, k: int, greedy: bool, max_new: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
        texts = ["Done.<|im_end|>"] * prompt_ids.size(0) if turn.later else \
            [SCRIPT[i % len(SCRIPT)] for i in range(prompt_ids.size(0) * k)]
        turn.later = True
        rows = [tok(t, add_special_tokens=False)["input_ids"][:max_new] for t in texts]
        ids = torch.full((len(rows), max(map(len, rows))), tok.pad_token_id)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
        return ids, torch.full(ids.shape, -1.0)

    def generate(prompts: list[str], k: int, **options: Any) -> Any:
        seen_prompts.append(list(prompts))
        turn.later = False
        return original(prompts, k, **options)

    turn.later = False
    trainer.backend._turn = turn
    trainer.backend.generate = generate


def _trainer(model_dir: Path, tmp_path: Path, factory: Any, reward_funcs: list[Any] | None, steps: int = 1) -> Any:
    import trl

    from grpo_core.api import GRPOTrainer

    rows = [{"prompt": [{"role": "user", "content": "Count."}], "task": "count"}]
    args = trl.GRPOConfig(output_dir=str(tmp_path / "run"), use_cpu=True, report_to="none", num_generations=4,
                          per_device_train_batch_size=4, max_completion_length=200, max_tool_calling_iterations=3,
                          max_steps=steps, learning_rate=1e-3)
    return GRPOTrainer(model=str(model_dir), reward_funcs=reward_funcs, train_dataset=rows, args=args,
                       environment_factory=factory)


def test_each_rollout_gets_its_own_environment_and_the_reward_reads_them(model_dir, tmp_path, use_core_registry):
    """TRL's environment test on this trainer: four rollouts of one prompt, each with an instance of its own
    (reset with its row, reused the next step); the reward gets the instances as TRL passes them and reads each
    rollout's state: 2, 5, 0 (no call) and 0 (an unknown tool)."""
    seen: list[dict[str, Any]] = []

    def counter_reward(completions: list[Any], environments: list[Any], **kwargs: Any) -> list[float]:
        seen.append({"ids": [id(e) for e in environments], "counters": [e.counter for e in environments],
                     "calls": kwargs["num_tool_calls"]})
        return [float(e.counter) for e in environments]

    trainer = _trainer(model_dir, tmp_path, Counter, [counter_reward], steps=2)
    assert [s["function"]["name"] for s in trainer.backend.tool_schemas] == ["increment"]
    assert '"name": "increment"' in trainer.prompts[0]
    prompts: list[list[str]] = []
    _script(trainer, prompts)
    trainer.train()
    assert [s["counters"] for s in seen] == [[2, 5, 0, 0]] * 2
    assert [s["calls"] for s in seen] == [[2, 1, 0, 1]] * 2
    assert len(set(seen[0]["ids"])) == 4 and seen[1]["ids"] == seen[0]["ids"]  # one each, the pool reused
    assert [len(e.resets) for e in trainer.environments] == [2, 2, 2, 2]  # once per step, the probe among them
    assert trainer.environments[1].resets[-1] == {"prompt": [{"role": "user", "content": "Count."}], "task": "count"}
    assert [len(p) for p in prompts] == [1, 1]  # no observation: one prompt, its group sampled together
    logs = next(h for h in reversed(trainer.state.log_history) if "tools/call_frequency" in h)
    assert logs["tools/call_frequency"] == pytest.approx(1.0) and logs["tools/failure_frequency"] == pytest.approx(0.25)


class Observed(Counter):
    """``reset`` returns text for its rollout's prompt; ``get_reward`` owns a reward."""

    def reset(self, **row: Any) -> str:
        super().reset(**row)
        return f" You are counter {self.number}."

    def get_reward(self) -> float:
        return float(self.counter)


def test_reset_text_joins_each_rollouts_prompt_and_get_reward_is_a_reward(model_dir, tmp_path, use_core_registry):
    """Each rollout's prompt carries its own instance's text (the group's prompts differ, sampled one each); the
    environment's get_reward scores each rollout (weight 1, named after its class) with no reward_funcs."""
    trainer = _trainer(model_dir, tmp_path, Observed, None)
    assert trainer.reward_func_names == ["Observed"]
    prompts: list[list[str]] = []
    _script(trainer, prompts)
    trainer.train()
    numbers = [e.number for e in trainer.environments]
    assert len(prompts[0]) == 4 and all(f"You are counter {n}." in p for p, n in zip(prompts[0], numbers))
    assert len(set(prompts[0])) == 4
    logs = next(h for h in reversed(trainer.state.log_history) if "tools/call_frequency" in h)
    assert {k.split("/")[1] for k in logs if k.startswith("rewards/")} == {"Observed"}  # the only reward
    assert logs["rewards/Observed/mean"] == pytest.approx((2 + 5 + 0 + 0) / 4)
