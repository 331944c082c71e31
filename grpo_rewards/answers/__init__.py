"""The answer grammar: how every built-in and plugin reads the answer of a completion. One owner per part:

* :mod:`~grpo_rewards.answers.reasoning`: the reasoning block (``<think>`` and the other reasoning tags),
  never an answer for any reward;
* :mod:`~grpo_rewards.answers.extraction`: where the final answer is (tags, ``####``, boxes, answer
  lines, the last number) and when several answers are a hedge; :mod:`~grpo_rewards.answers.boxes`
  scans the boxes;
* :mod:`~grpo_rewards.answers.prose`: the words around a number (revisions, negations, disjunctions,
  quoted claims, option letters);
* :mod:`~grpo_rewards.answers.numbers` and :mod:`~grpo_rewards.answers.number_words`: whether an answer
  is a number and which;
* :mod:`~grpo_rewards.answers.units`: quantities with units;
* :mod:`~grpo_rewards.answers.arithmetic`: arithmetic on literals, evaluated without running code
  (program-of-thought answers such as ``answer = 9 * 2``);
* :mod:`~grpo_rewards.answers.normalize`: how a non-numeric answer is compared as text;
* :mod:`~grpo_rewards.answers.fences`: fenced code blocks (code and JSON answers).

Every pass is linear in the text (``tests/rewards/test_answer_linear.py`` feeds 1 MB inputs of every
shape to every built-in). The forms and their outcomes: ``docs/answers.md``.
"""

from __future__ import annotations

from grpo_rewards.answers.extraction import METHODS, check_extraction, compared_answer, extract_answer
from grpo_rewards.answers.fences import Block, blocks, last_block
from grpo_rewards.answers.reasoning import REASONING_TAGS, reasoning_tags, strip_reasoning

__all__ = ["METHODS", "REASONING_TAGS", "Block", "blocks", "check_extraction", "compared_answer", "extract_answer",
           "last_block", "reasoning_tags", "strip_reasoning"]
