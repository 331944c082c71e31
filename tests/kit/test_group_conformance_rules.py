"""Each rule of GroupRewardConformance fails a group reward that breaks it, and only that one, while a group
reward that keeps the contract passes all; the built-in majority_vote passes the suite.

The suite runs in a pytest subprocess on rewards registered in an in-process registry, as a plugin's own tests
would run it (the per-row rules of RewardConformance are not collected for a group reward).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import strategies as st

from grpo_rewards.testing import GroupRewardConformance

SUBJECTS = '''
from hypothesis import Phase, settings, strategies as st

settings.register_profile("rules", max_examples=15, phases=[Phase.explicit, Phase.generate], database=None)
settings.load_profile("rules")

from grpo_rewards import GroupReward, RewardSpec, completion_text, hookimpl, load_registry
from grpo_rewards.testing import GroupRewardConformance


class Share:
    """Each completion's share of its group: a group reward that keeps the contract."""
    def __call__(self, completions, **_):
        texts = [completion_text(c) for c in completions]
        return [texts.count(t) / len(texts) for t in texts]


class Position:
    """Scores by position in the group: the order of the rows decides."""
    def __call__(self, completions, **_):
        return [i / len(completions) for i in range(len(completions))]


class BatchShare:
    """Not grouped at all: each completion's share of the whole batch, whatever its prompt."""
    __name__ = "batch_share"
    def __call__(self, completions, **_):
        return [len(completions) / 10.0 for _ in completions]


class Strict(Share):
    def __call__(self, completions, **cols):
        if any(not isinstance(c, str) for c in completions):
            raise TypeError("text only")
        return super().__call__(completions, **cols)


@hookimpl
def grpo_register_rewards(register):
    register(RewardSpec(name="share", factory=lambda: GroupReward(Share(), name="share")))
    register(RewardSpec(name="position", factory=lambda: GroupReward(Position(), name="position")))
    register(RewardSpec(name="batch_share", factory=BatchShare))
    register(RewardSpec(name="strict", factory=lambda: GroupReward(Strict(), name="strict")))


import sys
REGISTRY = load_registry(entry_points=False, extra_plugins=[("subjects", sys.modules[__name__])])
assert not REGISTRY.problems, REGISTRY.problems


class G(GroupRewardConformance):
    registry = REGISTRY
    completion = st.sampled_from(["<answer>1</answer>", "<answer>2</answer>", "none"])
    test_picklable = None  # the subjects are built by lambdas of this test module
    test_parameters_round_trip_through_toml = None  # the registry is not the process-wide one


class TestShare(G): reward_name = "share"
class TestPosition(G): reward_name = "position"
class TestBatchShare(G): reward_name = "batch_share"
class TestStrict(G): reward_name = "strict"
'''

G_RULES = {"test_one_finite_score_or_none_per_completion", "test_deterministic_and_permuting_rows_permutes_scores",
           "test_groups_are_independent", "test_never_raises_on_junk", "test_within_time_budget"}
EXPECTED_FAILURES = {
    "TestShare": set(),
    "TestPosition": {"test_deterministic_and_permuting_rows_permutes_scores"},
    "TestBatchShare": {"test_groups_are_independent"},
    "TestStrict": {"test_never_raises_on_junk", "test_within_time_budget"},  # the budget's rows include chat lists
}


@pytest.mark.slow
def test_each_group_rule_fails_the_subject_that_breaks_it(tmp_path: Path) -> None:
    (tmp_path / "test_subjects.py").write_text(textwrap.dedent(SUBJECTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GRPO_"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--tb=no",
                          "--hypothesis-seed=0", "test_subjects.py"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert run.returncode in (0, 1) and "error" not in summary, run.stdout[-3000:] + run.stderr[-3000:]
    failed = re.findall(r"^FAILED test_subjects\.py::(\w+)::(\w+)", run.stdout, re.M)
    got: dict[str, set[str]] = {cls: set() for cls in EXPECTED_FAILURES}
    for cls, rule in failed:
        got[cls].add(rule)
    assert got == EXPECTED_FAILURES, run.stdout[-3000:]
    passed = len(EXPECTED_FAILURES) * len(G_RULES) - sum(map(len, EXPECTED_FAILURES.values()))
    assert f"{passed} passed" in summary, summary  # the per-row rules are not collected: five rules per subject


class TestMajorityVote(GroupRewardConformance):
    reward_name = "majority_vote"
    completion = st.sampled_from(["<answer>1</answer>", "The answer is 1.", "<answer>2</answer>", "#### 3", "none",
                                  "<answer>1 or 2</answer>"])
    bounds = (0.0, 1.0)
