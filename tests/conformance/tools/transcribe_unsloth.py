"""Transcribe the Unsloth GRPO notebooks' reward functions into ``cases/unsloth.json``.

The notebooks have no test file, so the cases are completions of the notebooks' own
format (and of the ways real models miss it) scored by the notebooks' own code: the
reward functions are read from the notebooks at a commit of unslothai/notebooks (the
``def`` statements of their code cells, run here as written) and each case's
``expected`` is what the notebook function returns.

* ``nb/Llama3.1_(8B)-GRPO.ipynb`` (the GSM8K notebook): ``correctness_reward_func`` →
  ``exact_match``, ``int_reward_func`` → ``integer_format``, ``strict_format_reward_func``
  → ``strict_format``, ``soft_format_reward_func`` → ``soft_format``,
  ``xmlcount_reward_func`` → ``xml_count``, each with its defaults.
* ``nb/Qwen3_(4B)-GRPO.ipynb``: ``check_answer`` → ``numeric_proximity`` in ``tiered``
  mode, the answer taken by the notebook's own ``match_format`` regular expression;
  ``match_format_exactly`` → ``final_answer_format`` and ``match_format_approximately`` →
  ``xml_count`` in ``count`` mode, both with the notebook's markers and values, on completions
  of the notebook's layout and of the ways real completions miss it.

Usage: python tests/conformance/tools/transcribe_unsloth.py GIT_DIR COMMIT > tests/conformance/cases/unsloth.json
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import sys
from typing import Any

from _peer_tests import git, with_reasons, with_sources

REPO = "https://github.com/unslothai/notebooks"
GSM8K_NB, QWEN3_NB = "nb/Llama3.1_(8B)-GRPO.ipynb", "nb/Qwen3_(4B)-GRPO.ipynb"
EOS = "<|endoftext|>"  # the Qwen3 tokenizer's eos_token, which the notebook's match_format allows after </SOLUTION>
GSM8K_FUNCTIONS = {
    "correctness_reward_func": ("exact_match", {}),
    "int_reward_func": ("integer_format", {}),
    "strict_format_reward_func": ("strict_format", {}),
    "soft_format_reward_func": ("soft_format", {}),
    "xmlcount_reward_func": ("xml_count", {}),
}
BUILTINS = "grpo_rewards/builtins/"
DELIBERATE = {
    "normalised_equality": {
        "reward": "exact_match", "documented_in": BUILTINS + "exact_match.py",
        "phrase": "so ``<answer>1,080</answer>`` counts for reference ``1080`` and ``72.0`` for ``72``",
        "reason": "the answer is compared with the reference after normalisation, as numbers: 1,080 is 1080, "
                  "72.0 and $72 are 72 (the notebook compares strings)",
    },
    "extracted_answer": {
        "reward": "exact_match", "documented_in": BUILTINS + "exact_match.py",
        "phrase": "the answer is found with ``extract`` (``auto``: tags, then ``####``",
        "reason": "the answer is extracted (tags, then ####, \\boxed{}, 'the answer is', last number); the "
                  "notebook compares the whole text when there is no <answer> tag",
    },
    "integer_extracted": {
        "reward": "integer_format", "documented_in": BUILTINS + "integer_format.py",
        "phrase": "the answer is found with ``extract`` (``auto`` by default, so ``#### 72`` counts too)",
        "reason": "the answer is extracted (#### 72 counts); the notebook tests the whole text without <answer>",
    },
    "hedged_answers": {
        "reward": "exact_match / integer_format", "documented_in": BUILTINS + "exact_match.py",
        "phrase": "Several answers are hedging, not an answer",
        "reason": "several final answers are hedging, not an answer: with several <answer> tags that differ every "
                  "tag is read (71, 72), which is no number; the notebook reads the last tag only",
    },
    "ascii_digits": {
        "reward": "integer_format", "documented_in": BUILTINS + "integer_format.py",
        "phrase": "only ASCII digits count",
        "reason": "only ASCII digits make an integer (str.isdigit also accepts ² and ٣)",
    },
    "multiline_blocks": {
        "reward": "strict_format / soft_format", "documented_in": BUILTINS + "formats.py",
        "phrase": "``.`` matches newlines, so multi-line reasoning and answers count",
        "reason": "'.' crosses newlines, so a block with a newline inside counts (the notebook's patterns have "
                  "no re.DOTALL: its soft format never matches the layout its own prompt asks for)",
    },
    "numeric_tiers": {
        "reward": "numeric_proximity", "documented_in": BUILTINS + "numeric_proximity.py",
        "phrase": "equality is numeric after normalisation",
        "reason": "equality is numeric after normalisation: ' 72 ', '72.0' and '1,080' (for 1080) score the "
                  "exact tier (the notebook: 3.5, 2.0, -4.5)",
    },
    "number_words": {
        "reward": "numeric_proximity", "documented_in": "grpo_rewards/answers/numbers.py",
        "phrase": "an integer in English words",
        "reason": "an integer written in English words is a number: 'seventy-two' is 72, the exact tier (the "
                  "notebook's float() cannot read it: -4.5)",
    },
    "zero_reference": {
        "reward": "numeric_proximity", "documented_in": BUILTINS + "numeric_proximity.py",
        "phrase": "a wrong answer to reference 0 scores ``far``",
        "reason": "a wrong answer to reference 0 scores the far tier (-2.5); the notebook divides by zero and "
                  "scores -4.5",
    },
}
REASONING = "Natalia sold 48 / 2 = 24 clips in May.\nAltogether she sold 48 + 24 = 72 clips."
ONE_LINE = "48 / 2 = 24 in May, 48 + 24 = 72 in all."
# (name, completion, reference): the notebook's format, and the ways real completions miss it
GSM8K_INPUTS = (
    ("one_line", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n72\n</answer>\n", "72"),
    ("multi_line", f"<reasoning>\n{REASONING}\n</reasoning>\n<answer>\n72\n</answer>\n", "72"),
    ("no_final_newline", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n72\n</answer>", "72"),
    ("wrong", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n71\n</answer>\n", "72"),
    ("inline_tags", f"<reasoning>{ONE_LINE}</reasoning><answer>72</answer>", "72"),
    ("text_after", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n72\n</answer>\nHope this helps!", "72"),
    ("thousands", "<reasoning>\n9 * 120 = 1080\n</reasoning>\n<answer>\n1,080\n</answer>\n", "1080"),
    ("dollars", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n$72\n</answer>\n", "72"),
    ("decimal", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n72.0\n</answer>\n", "72"),
    ("negative", "<reasoning>\n3 - 8 = -5\n</reasoning>\n<answer>\n-5\n</answer>\n", "-5"),
    ("superscript", "<reasoning>\n2 squared\n</reasoning>\n<answer>\n²\n</answer>\n", "4"),
    ("empty_answer", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n\n</answer>\n", "72"),
    ("two_answers", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n71\n</answer>\n<answer>\n72\n</answer>\n",
     "72"),
    ("no_tags_sentence", f"{ONE_LINE}\nThe answer is 72.", "72"),
    ("gsm8k_style", f"{REASONING}\n#### 72", "72"),
    ("answer_only", "<answer>\n72\n</answer>\n", "72"),
    ("unclosed_answer", f"<reasoning>\n{ONE_LINE}\n</reasoning>\n<answer>\n72", "72"),
)
QWEN3_INPUTS = (
    ("exact", "72", "72"), ("spaces", " 72 ", "72"), ("decimal", "72.0", "72"), ("near", "70", "72"),
    ("close", "60", "72"), ("far", "7", "72"), ("words", "seventy-two", "72"), ("thousands", "1,080", "1080"),
    ("zero_reference", "5", "0"), ("negative", "-5", "-5"),
)


MARKERS = {"reasoning_start": "<start_working_out>", "reasoning_end": "<end_working_out>",
           "answer_start": "<SOLUTION>", "answer_end": "</SOLUTION>"}
LAYOUT_FUNCTIONS = {
    # end = "line": the notebook's re.MULTILINE "$" (the default, "text", allows nothing after the answer block)
    "match_format_exactly": ("final_answer_format", {**MARKERS, "value": 3.0, "eos": EOS, "end": "line"}),
    # check_order = false: the notebook counts each marker wherever it is (the default pays a marker only in order)
    "match_format_approximately": ("xml_count", {**MARKERS, "mode": "count", "per_tag": 0.5, "per_bad_tag": -1.0,
                                                 "opened_in_prompt": True, "check_order": False}),
}
# (name, completion): the notebook's layout after the prompt's <start_working_out>, and the ways it is missed
_W = ONE_LINE
QWEN3_LAYOUTS = (
    ("layout", f"{_W}<end_working_out><SOLUTION>72</SOLUTION>"),
    ("start_written_again", f"<start_working_out>{_W}<end_working_out><SOLUTION>72</SOLUTION>"),
    ("newlines", f"{_W}\n<end_working_out>\n<SOLUTION>\n72\n</SOLUTION>\n"),
    ("eos", f"{_W}<end_working_out><SOLUTION>72</SOLUTION>{EOS}"),
    ("spaces_and_eos", f"{_W}<end_working_out><SOLUTION>  72  </SOLUTION>\n\n{EOS}\n"),
    ("text_between", f"{_W}<end_working_out>So the solution is<SOLUTION>72</SOLUTION>"),
    ("text_after_on_the_line", f"{_W}<end_working_out><SOLUTION>72</SOLUTION> Hope this helps!"),
    ("text_after_a_line_break", f"{_W}<end_working_out><SOLUTION>72</SOLUTION>\nHope this helps!"),
    ("empty_solution", f"{_W}<end_working_out><SOLUTION></SOLUTION>"),
    ("no_end_working_out", f"{_W}<SOLUTION>72</SOLUTION>"),
    ("two_solutions", f"{_W}<end_working_out><SOLUTION>71</SOLUTION><SOLUTION>72</SOLUTION>"),
    ("unclosed_solution", f"{_W}<end_working_out><SOLUTION>72"),
    ("reversed", f"</SOLUTION>72<SOLUTION><end_working_out>{_W}"),
    ("solution_first", f"<SOLUTION>72</SOLUTION>{_W}<end_working_out>"),
    ("gsm8k_layout", f"<reasoning>\n{_W}\n</reasoning>\n<answer>\n72\n</answer>\n"),
    ("no_tags", f"{_W} The answer is 72."),
    ("empty", ""),
)


def _cells(path: str, commit: str, git_dir: str) -> list[str]:
    notebook = json.loads(git(git_dir, "show", f"{commit}:{path}"))
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def _run(cells: list[str], names: set[str], scope: dict[str, Any]) -> dict[str, Any]:
    """Run the top-level statements of ``cells`` that define (def or assign) one of ``names``."""
    for cell in cells:
        try:
            tree = ast.parse(cell)
        except SyntaxError:  # notebook magics
            continue
        for node in tree.body:
            defined = {node.name} if isinstance(node, ast.FunctionDef) else {
                t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)}
            if defined & names:
                exec(compile(ast.Module([node], []), "<notebook>", "exec"), scope)
    missing = names - set(scope)
    if missing:
        raise SystemExit(f"the notebook defines no {sorted(missing)}")
    return scope


class _Tokenizer:
    eos_token = EOS


def cases(git_dir: str, commit: str) -> list[dict[str, Any]]:
    gsm8k = _run(_cells(GSM8K_NB, commit, git_dir), {"extract_xml_answer", "count_xml", *GSM8K_FUNCTIONS},
                 {"re": re})
    qwen3 = _run(_cells(QWEN3_NB, commit, git_dir), {"reasoning_start", "reasoning_end", "solution_start",
                                                     "solution_end", "solution_end_regex", "match_format",
                                                     "check_answer", *LAYOUT_FUNCTIONS},
                  {"re": re, "tokenizer": _Tokenizer})
    out: list[dict[str, Any]] = []
    prompts = [[{"role": "user", "content": "How many clips did Natalia sell?"}]]
    for function, (reward, config) in GSM8K_FUNCTIONS.items():
        for name, completion, reference in GSM8K_INPUTS:
            with contextlib.redirect_stdout(io.StringIO()):  # correctness_reward_func prints each batch
                score = gsm8k[function](prompts=prompts, completions=[[{"content": completion}]], answer=[reference])[0]
            out.append({"id": f"{function}[{name}]", "test": f"{GSM8K_NB}::{function}", "peer": function,
                        "reward": reward, "config": config, "chat": True, "completion": completion,
                        "columns": {"answer": reference}, "expected": float(score)})
    pattern = qwen3["match_format"].pattern
    for name, solution, reference in QWEN3_INPUTS:
        completion = (f"{qwen3['reasoning_start']}{ONE_LINE}{qwen3['reasoning_end']}"
                      f"{qwen3['solution_start']}{solution}{qwen3['solution_end']}")
        score = qwen3["check_answer"](prompts=prompts, completions=[[{"content": completion}]], answer=[reference])[0]
        out.append({"id": f"check_answer[{name}]", "test": f"{QWEN3_NB}::check_answer", "peer": "check_answer",
                    "reward": "numeric_proximity",
                    "config": {"mode": "tiered", "extract": "regex", "pattern": f"(?m){pattern}"}, "chat": True,
                    "completion": completion, "columns": {"answer": reference}, "expected": float(score)})
    missing = {"completion": "no solution tags", "reference": "72"}
    score = qwen3["check_answer"](prompts=prompts, completions=[[{"content": missing["completion"]}]],
                                  answer=[missing["reference"]])[0]
    out.append({"id": "check_answer[no_solution]", "test": f"{QWEN3_NB}::check_answer", "peer": "check_answer",
                "reward": "numeric_proximity", "config": out[-1]["config"], "chat": True,
                "completion": missing["completion"], "columns": {"answer": missing["reference"]},
                "expected": float(score)})
    for function, (reward, config) in LAYOUT_FUNCTIONS.items():
        for name, completion in QWEN3_LAYOUTS:
            score = qwen3[function](completions=[[{"content": completion}]])[0]
            out.append({"id": f"{function}[{name}]", "test": f"{QWEN3_NB}::{function}", "peer": function,
                        "reward": reward, "config": config, "chat": True, "completion": completion,
                        "columns": {}, "expected": float(score)})
    return out


NOT_COVERED = {
    "check_numbers": "1.5 when the first number after <SOLUTION> equals the reference as a float: no built-in "
                     "with that score (exact_match with extract = regex is the nearest)",
}
ANNOTATIONS: dict[str, dict[str, Any]] = {
    **{f"correctness_reward_func[{n}]": {"deliberate": "normalised_equality", "ours": 2.0}
       for n in ("thousands", "dollars", "decimal")},
    **{f"correctness_reward_func[{n}]": {"deliberate": "extracted_answer", "ours": 2.0}
       for n in ("no_tags_sentence", "gsm8k_style")},
    "int_reward_func[superscript]": {"deliberate": "ascii_digits", "ours": 0.0},
    "correctness_reward_func[two_answers]": {"deliberate": "hedged_answers", "ours": 0.0},
    "int_reward_func[two_answers]": {"deliberate": "hedged_answers", "ours": 0.0},
    **{f"int_reward_func[{n}]": {"deliberate": "integer_extracted", "ours": 0.5}
       for n in ("no_tags_sentence", "gsm8k_style")},
    "strict_format_reward_func[multi_line]": {"deliberate": "multiline_blocks", "ours": 0.5},
    **{f"soft_format_reward_func[{n}]": {"deliberate": "multiline_blocks", "ours": 0.5}
       for n in ("one_line", "multi_line", "no_final_newline", "wrong", "text_after", "thousands", "dollars",
                 "decimal", "negative", "superscript", "empty_answer", "two_answers")},
    **{f"check_answer[{n}]": {"deliberate": "numeric_tiers", "ours": 5.0} for n in ("spaces", "decimal", "thousands")},
    "check_answer[zero_reference]": {"deliberate": "zero_reference", "ours": -2.5},
    "check_answer[words]": {"deliberate": "number_words", "ours": 5.0},
}


def main() -> None:
    git_dir = sys.argv[1]
    commit = git(git_dir, "rev-parse", sys.argv[2]).strip()
    found = cases(git_dir, commit)
    for case in found:
        case.update(ANNOTATIONS.get(case["id"], {}))
    unknown = set(ANNOTATIONS) - {c["id"] for c in found}
    if unknown:
        raise SystemExit(f"annotations for cases that do not exist: {sorted(unknown)}")
    doc = {
        "suite": "Unsloth",
        "source": {"repo": REPO, "commit": commit, "files": [GSM8K_NB, QWEN3_NB],
                   "transcribed_by": "tests/conformance/tools/transcribe_unsloth.py"},
        "deliberate": DELIBERATE,
        "not_covered": [{"test": f"{QWEN3_NB}::{name}", "reason": f"{name}: {why}"} for name, why in NOT_COVERED.items()],
        "cases": with_reasons(with_sources(found, REPO, commit), DELIBERATE),
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
