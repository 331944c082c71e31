"""The multi-turn rollout's mechanics (grpo_core.generation.multi_turn) with a scripted model: each row's turns
are forced texts, so what the rollout appends, masks, stops and asks the sampler for is known exactly; the
tool-call parser and the ids after a tool call, against TRL 1.16's own."""

from __future__ import annotations

import threading
import types
from typing import Any

import pytest
import torch
from tool_models import NOT_PREFIX_PRESERVING, QWEN25_TEMPLATE, tool_tokenizer

from grpo_core.generation.multi_turn import RolloutLimits, multi_turn_rollout
from grpo_core.generation.tools.builtin import calculator
from grpo_core.generation.tools.formats import parse_tool_calls, tool_suffix_ids
from grpo_core.generation.tools.toolset import ToolSet

CALL = '<tool_call>\n{{"name": "calculator", "arguments": {{"expression": "{}"}}}}\n</tool_call><|im_end|>'
PROMPT = [{"role": "user", "content": "What is 6*7?"}]


class Scripted:
    """A sampler whose rows write forced turns: ``turns[row]`` in order; it records what it was asked."""

    def __init__(self, tokenizer: Any, turns: dict[int, list[str]]):
        self.tok, self.turns, self.calls = tokenizer, {r: list(t) for r, t in turns.items()}, []
        self.forced: dict[int, list[list[int]]] = {r: [] for r in turns}

    def __call__(self, turn: int, rows: list[int], contexts: list[list[int]], max_new: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls.append((turn, list(rows), [list(c) for c in contexts], max_new))
        out = []
        for r in rows:
            ids = self.tok(self.turns[r].pop(0), add_special_tokens=False)["input_ids"][:max_new]
            self.forced[r].append(ids)
            out.append(ids)
        width = max(len(ids) for ids in out)
        ids = torch.full((len(rows), width), self.tok.pad_token_id)
        for i, row in enumerate(out):
            ids[i, : len(row)] = torch.tensor(row)
        return ids, torch.full(ids.shape, -0.5)


def _prompts(tok: Any, n: int) -> list[list[int]]:
    return [tok.apply_chat_template(PROMPT, tools=[calculator], add_generation_prompt=True, tokenize=True,
                                    return_dict=False)] * n


def _run(tok: Any, turns: dict[int, list[str]], tools: list[Any] | None = None, timeout_s: float = 5.0,
         **limits: Any) -> tuple[Any, Scripted]:
    sampler = Scripted(tok, turns)
    limits = {"max_completion_length": 400, "max_context": 4096, **limits}
    rollout = multi_turn_rollout(_prompts(tok, len(turns)), sampler, tok, ToolSet(tools or [calculator],
                                 timeout_s=timeout_s), eos_ids=[tok.eos_token_id], limits=RolloutLimits(**limits))
    return rollout, sampler


TURNS = {0: [CALL.format("6*7"), "It is 42.<|im_end|>"], 1: ["42<|im_end|>"],
         2: ["<think>hm</think>\n" + CALL.format("6*7"), CALL.format("42+0"), "42<|im_end|>"]}


@pytest.mark.parametrize("template", [QWEN25_TEMPLATE, NOT_PREFIX_PRESERVING], ids=["qwen2.5", "not-prefix-preserving"])
def test_turns_alternate_and_ids_are_carried_not_retokenized(template: str) -> None:
    """Row 0 calls once then answers, row 1 answers at once, row 2 calls twice: each turn samples only the rows
    still running, and each completion is its forced turns with the tool ids between, in order."""
    tok = tool_tokenizer(template)
    rollout, sampler = _run(tok, TURNS)
    assert [(turn, rows) for turn, rows, _, _ in sampler.calls] == [(0, [0, 1, 2]), (1, [0, 2]), (2, [2])]
    for r in range(3):
        tools_answers = [m for m in rollout.conversations[r] if m["role"] == "tool"]
        want, mask = [], []
        for i, ids in enumerate(sampler.forced[r]):
            want += ids
            mask += [1] * len(ids)
            if i < len(sampler.forced[r]) - 1:  # the tool ids after every turn but the last
                suffix = tool_suffix_ids(tok, [tools_answers[i]], [tok.eos_token_id])
                want += suffix
                mask += [0] * len(suffix)
        assert rollout.completion_ids[r] == want
        assert rollout.model_mask[r] == mask
        assert rollout.logps[r] == [-0.5 if m else 0.0 for m in mask]
        assert rollout.facts[r]["stop"] == "answer" and not rollout.truncated[r]
    # the next turn's context is the prompt and the completion so far, as carried
    assert sampler.calls[2][2][0] == _prompts(tok, 1)[0] + rollout.completion_ids[2][: len(sampler.calls[2][2][0])
                                                                                    - len(_prompts(tok, 1)[0])]
    assert [m["content"] for m in rollout.conversations[0] if m["role"] == "tool"] == ["42"]
    assert "42" in tok.decode(rollout.completion_ids[0]) and "<tool_response>\n42\n</tool_response>" in tok.decode(
        rollout.completion_ids[0])
    assert [f["tool_calls"] for f in rollout.facts] == [1, 0, 2] and [f["turns"] for f in rollout.facts] == [2, 1, 3]
    # the conversation in TRL's format: the call parsed out of the assistant's content
    assert rollout.conversations[0][0] == {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "6*7"}}}]}
    assert rollout.conversations[0][1] == {"role": "tool", "name": "calculator", "content": "42"}


def test_the_carried_ids_do_not_depend_on_how_the_template_renders_earlier_turns() -> None:
    """The same turns under Qwen2.5's template and under one that renders earlier turns differently once more
    follow (TRL's check: not prefix-preserving) give the same completion ids; rendering the conversation again
    with the latter gives other ids than the ones the model saw."""
    tok, other = tool_tokenizer(QWEN25_TEMPLATE), tool_tokenizer(NOT_PREFIX_PRESERVING)
    ours, _ = _run(tok, TURNS)
    theirs, _ = _run(other, TURNS)
    assert ours.completion_ids == theirs.completion_ids
    rendered = [t.apply_chat_template(PROMPT + ours.conversations[2], tools=[calculator], tokenize=True,
                                      return_dict=False) for t in (tok, other)]
    carried = _prompts(tok, 1)[0] + ours.completion_ids[2]
    assert rendered[0][: len(carried)] == carried  # Qwen2.5 renders what the model saw
    assert rendered[1][: len(carried)] != carried  # the other template does not: the ids must be carried


def test_the_ids_after_a_call_are_trls_and_found_where_trl_cannot() -> None:
    """Against ``GRPOTrainer._get_tool_suffix_ids`` (trl 1.16): the same ids on a prefix-preserving template; on
    one that is not, TRL's raises (TRL swaps in a training template instead) and ours gives the same ids."""
    from trl import GRPOTrainer
    from trl.chat_template_utils import is_chat_template_prefix_preserving

    messages = [{"role": "tool", "name": "calculator", "content": "42"},
                {"role": "tool", "name": "calculator", "content": "error: division by zero"}]
    ours = {}
    for name, template in [("qwen", QWEN25_TEMPLATE), ("other", NOT_PREFIX_PRESERVING)]:
        tok = tool_tokenizer(template)
        fake = types.SimpleNamespace(processing_class=tok, _tokenizer=tok, chat_template=None, chat_template_kwargs={},
                                     _is_vlm=False)
        ours[name] = tool_suffix_ids(tok, messages, [tok.eos_token_id])
        if name == "qwen":
            assert is_chat_template_prefix_preserving(tok)
            assert ours[name] == GRPOTrainer._get_tool_suffix_ids(fake, messages)
        else:
            assert not is_chat_template_prefix_preserving(tok)
            with pytest.raises(ValueError):
                GRPOTrainer._get_tool_suffix_ids(fake, messages)
    assert ours["qwen"] == ours["other"]


def test_the_parser_reads_calls_as_trls_qwen_schema_does() -> None:
    """Well-formed calls: the names and arguments TRL's ``parse_response`` (qwen3 schema) reads from the same ids."""
    from trl.chat_template_utils import add_response_schema, parse_response

    tok = add_response_schema(tool_tokenizer())  # TRL recognises the Qwen2.5 template
    texts = [CALL.format("1+2"),
             'Let me see.\n<tool_call>\n{"name": "f", "arguments": {"a": 3, "b": "x"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call><|im_end|>']
    for text in texts:
        want = parse_response(tok, tok(text, add_special_tokens=False)["input_ids"], prefix=_prompts(tok, 1)[0])
        got = parse_tool_calls(text)
        assert [{"name": c.name, "arguments": c.arguments} for c in got] == [
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in want["tool_calls"]]


def test_malformed_calls_unknown_tools_and_bad_arguments_are_answered_with_errors() -> None:
    """What a model writes wrong is answered in the context, as a tool message, and the rollout goes on."""
    tok = tool_tokenizer()
    bad = ["<tool_call>\n{not json}\n</tool_call><|im_end|>",
           '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call><|im_end|>',
           '<tool_call>\n{"name": "calculator", "arguments": {"x": 1}}\n</tool_call><|im_end|>',
           '<tool_call>\n{"name": "calculator", "arguments": {"expression": "__import__(\'os\')"}}\n</tool_call>'
           "<|im_end|>",
           "<tool_call>\n{\"name\": \"calculator\"<|im_end|>"]
    rollout, _ = _run(tok, {0: [*bad, "done<|im_end|>"]}, max_completion_length=4000)
    answers = [m["content"] for m in rollout.conversations[0] if m["role"] == "tool"]
    assert len(answers) == len(bad) and all(a.startswith("error: ") for a in answers)
    assert "not valid JSON" in answers[0] and "no tool named 'nope'" in answers[1]
    assert "TypeError" in answers[2] and "not Call" in answers[3] and "never closed" in answers[4]
    assert rollout.facts[0] == {"turns": 6, "tool_calls": 5, "tool_errors": 5, "stop": "answer"}
    assert "no tool named" in tok.decode(rollout.completion_ids[0])  # the model sees it


def test_a_tool_that_raises_or_hangs_costs_the_call_not_the_run() -> None:
    release = threading.Event()

    def boom(x: int) -> str:
        """Raise.

        Args:
            x: anything
        """
        raise RuntimeError("kaput")

    def hang(x: int) -> str:
        """Wait.

        Args:
            x: anything
        """
        release.wait()
        return "late"

    call = '<tool_call>\n{{"name": "{}", "arguments": {{"x": 1}}}}\n</tool_call><|im_end|>'
    tok = tool_tokenizer()
    try:
        rollout, _ = _run(tok, {0: [call.format("boom"), "ok<|im_end|>"], 1: [call.format("hang"), "ok<|im_end|>"]},
                          tools=[boom, hang], timeout_s=0.3)
    finally:
        release.set()
    assert [m["content"] for m in rollout.conversations[0] if m["role"] == "tool"] == ["error: RuntimeError: kaput"]
    assert [m["content"] for m in rollout.conversations[1] if m["role"] == "tool"] == [
        "error: the tool timed out after 0.3 s"]
    assert [f["stop"] for f in rollout.facts] == ["answer", "answer"]
    assert [f["tool_errors"] for f in rollout.facts] == [1, 1]


def test_flooding_output_is_cut() -> None:
    def flood(x: int) -> str:
        """Print a lot.

        Args:
            x: anything
        """
        return "y" * 100_000

    tok = tool_tokenizer()
    sampler = Scripted(tok, {0: ['<tool_call>\n{"name": "flood", "arguments": {"x": 1}}\n</tool_call><|im_end|>',
                                 "ok<|im_end|>"]})
    rollout = multi_turn_rollout(_prompts(tok, 1), sampler, tok, ToolSet([flood], max_output_chars=50),
                                 eos_ids=[tok.eos_token_id], limits=RolloutLimits(400, 4096))
    content = rollout.conversations[0][1]["content"]
    assert content == "y" * 50 + "\n[99950 characters cut]"


def test_limits_end_rows_cleanly() -> None:
    """Turns, tokens, context and time each end a row where they are hit, with the completion so far kept."""
    tok = tool_tokenizer()
    forever = [CALL.format("1+1")] * 6
    # turns: two tool turns, then the third model turn's calls go unanswered
    rollout, sampler = _run(tok, {0: list(forever)}, max_tool_calling_iterations=2)
    assert rollout.facts[0]["stop"] == "turns" and rollout.facts[0]["turns"] == 3
    assert rollout.facts[0]["tool_calls"] == 2 and not rollout.truncated[0]
    assert rollout.model_mask[0][-1] == 1  # it ends on the model's own turn
    # tokens: a turn longer than what is left is cut there and the row is truncated
    one_turn = len(tok(CALL.format("1+1"), add_special_tokens=False)["input_ids"])
    rollout, sampler = _run(tok, {0: list(forever)}, max_completion_length=one_turn - 3)
    assert rollout.facts[0]["stop"] == "length" and rollout.truncated[0]
    assert len(rollout.completion_ids[0]) == one_turn - 3 and sampler.calls[0][3] == one_turn - 3
    # the tool output does not fit in what is left: the row ends after its turn, without it
    rollout, _ = _run(tok, {0: list(forever)}, max_completion_length=one_turn + 10)
    assert rollout.facts[0]["stop"] == "context" and len(rollout.completion_ids[0]) == one_turn
    assert set(rollout.model_mask[0]) == {1} and not rollout.truncated[0]
    # the model's context: the same, counted with the prompt
    prompt = len(_prompts(tok, 1)[0])
    rollout, sampler = _run(tok, {0: list(forever)}, max_context=prompt + 2 * one_turn + 30)
    assert rollout.facts[0]["stop"] in ("context", "length")
    assert prompt + len(rollout.completion_ids[0]) <= prompt + 2 * one_turn + 30
    assert all(len(ctx) + new <= prompt + 2 * one_turn + 30 for _, _, ctxs, new in sampler.calls for ctx in ctxs)
    # time: no tool turn starts once the rollout's wall time is spent
    rollout, _ = _run(tok, {0: list(forever), 1: ["42<|im_end|>"]}, max_seconds=0.0)
    assert [f["stop"] for f in rollout.facts] == ["time", "answer"]


def test_a_reference_printed_by_a_tool_earns_no_accuracy_reward() -> None:
    """Hacking probe: the rollout's conversations go to the rewards as TRL passes them, and an answer reward reads
    the model's last turn, not a tool's output: a tool that prints the reference, followed by a wrong answer,
    scores as the wrong answer; the same calls followed by the right one score as it."""
    from grpo_rewards import reward

    tok = tool_tokenizer()
    rollout, _ = _run(tok, {0: [CALL.format("6*7"), "<answer>41</answer><|im_end|>"],
                            1: [CALL.format("6*7"), "<answer>42</answer><|im_end|>"],
                            2: ["<answer>41</answer><|im_end|>"]})
    assert rollout.conversations[0][1]["content"] == "42"  # the reference is in the context
    exact = reward("exact_match")
    wrong_with_tool, right, wrong = exact(rollout.conversations, answer=["42"] * 3)
    assert wrong_with_tool == wrong < right
