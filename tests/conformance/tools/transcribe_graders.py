"""Score the published answer formats of the model families users train with the graders of the evaluation
harnesses, into ``cases/lm_eval.json`` and ``cases/simple_evals.json``.

The corpus (:data:`OUTPUTS`) is one GSM8K problem (Janet's ducks, gold 18) answered in each family's published
answer format (the format's source in :data:`FORMATS`), rightly and wrongly, and in the ways real outputs miss
a grader (a draft in ``<think>``, a box followed by a different final answer). Each case's ``expected`` is the
verdict (1.0 or 0.0) of a grader's own code, read from its repository at a commit and run here as written:

* lm-evaluation-harness ``gsm8k``: the ``strict-match`` and ``flexible-extract`` filters of
  ``lm_eval/tasks/gsm8k/gsm8k.yaml`` (``RegexFilter`` of ``lm_eval/filters/extraction.py``, then
  ``take_first``) and its ``exact_match`` metric with the task's options (``exact_match_hf_evaluate`` of
  ``lm_eval/api/metrics.py``), against the GSM8K solution;
* lm-evaluation-harness ``minerva_math``: ``process_results`` of ``lm_eval/tasks/minerva_math/utils.py``
  (its ``math_verify`` score; its ``exact_match`` needs sympy's LaTeX parser with antlr4 4.11, run when
  installed), against a MATH-style solution ending in ``\\boxed{18}``;
* OpenAI simple-evals ``mgsm``: ``parse_answer`` and ``score_mgsm`` of ``mgsm_eval.py`` with the English
  answer prefix ``Answer``, against the target ``18``.
* Qwen2.5-Math's evaluation: ``extract_answer(pred, "gsm8k")`` and ``parse_ground_truth`` of
  ``evaluation/parser.py``, then ``math_equal`` of ``evaluation/grader.py``, against the GSM8K solution. Its
  modules import ``latex2sympy2`` and ``word2number`` (pinning ``antlr4-python3-runtime`` 4.7.2), which the
  toolkit does not install: they run in a child process with ``QWEN_EVAL_DEPS`` on its path, a folder made
  by ``pip install --target DIR --no-deps latex2sympy2 word2number antlr4-python3-runtime==4.7.2``.

Our reward is ``exact_match`` (``value = 1``) with the grader's reference; where a grader's verdict differs
on purpose the case is ``deliberate`` and its reason is stated in ``docs/answers.md``.

Usage: python tests/conformance/tools/transcribe_graders.py lm_eval LM_EVAL_GIT COMMIT > tests/conformance/cases/lm_eval.json
       python tests/conformance/tools/transcribe_graders.py simple_evals SIMPLE_EVALS_GIT COMMIT > tests/conformance/cases/simple_evals.json
       QWEN_EVAL_DEPS=DIR python tests/conformance/tools/transcribe_graders.py qwen_math QWEN25_MATH_GIT COMMIT \
           > tests/conformance/cases/qwen_math.json
"""

from __future__ import annotations

import ast
import json
import re
import string
import sys
from typing import Any

import numpy as np
import yaml
from _peer_tests import git

GSM8K_SOLUTION = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
                  "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer’s market.\n#### 18")
MATH_SOLUTION = "Janet sells $16 - 3 - 4 = 9$ eggs a day, so she makes $9 \\cdot 2 = \\boxed{18}$ dollars."
WORK = "Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4, so she sells 16 - 3 - 4 = 9 eggs."

#: family -> where its answer format is published
FORMATS = {
    "Qwen2.5-Math": "Qwen2.5-Math's chain-of-thought prompt: 'put your final answer within \\boxed{}'",
    "DeepSeek-R1": "DeepSeek-R1 distills: reasoning in <think>...</think>, then the answer, boxed",
    "Llama-3": "Llama 3.1's MATH/GSM8K evaluation prompts: 'The final answer is: $\\boxed{answer}$'",
    "Minerva": "Minerva's prompt (Lewkowycz et al. 2022; lm-eval minerva_math): 'Final Answer: The final answer is "
               "$answer$. I hope it is correct.'",
    "Mistral": "lm-eval gsm8k-cot few-shot answers, as Mistral-7B-Instruct follows them: 'The answer is 18.'",
    "Phi": "Phi-4-mini-reasoning: reasoning in <think>...</think>, then a bold final answer line",
    "SmolLM2": "this repository's GRPO format (SmolLM2 after training): <reasoning>...</reasoning><answer>...</answer>",
    "GSM8K": "GSM8K's own solutions: '#### 18'",
}

#: (family, variant, completion)
OUTPUTS = [
    ("Qwen2.5-Math", "right", f"{WORK}\nShe makes $9 \\times 2 = 18$ dollars.\n\nTherefore, Janet makes "
                              "\\(\\boxed{18}\\) dollars every day at the farmers' market."),
    ("Qwen2.5-Math", "wrong", f"{WORK}\nShe makes $9 \\times 2 = 17$ dollars.\n\nTherefore, Janet makes "
                              "\\(\\boxed{17}\\) dollars every day at the farmers' market."),
    ("DeepSeek-R1", "right", "<think>\nOkay, 16 eggs. She eats 3, bakes 4, so 9 left. At $2 that is 18. Wait, "
                             "maybe 16 - 3 = 13 first? No: 9 eggs, $18.\n</think>\n\nJanet sells 9 eggs at $2 each."
                             "\n\n**Final Answer**\n\\[\n\\boxed{18}\n\\]"),
    ("DeepSeek-R1", "draft right, answer wrong", "<think>\n16 - 3 - 4 = 9, times 2 is 18. So \\boxed{18}.\n</think>"
                                                 "\n\nShe sells 9 eggs at $2 each and makes 17 dollars... \n\n"
                                                 "**Final Answer**\n\\[\n\\boxed{17}\n\\]"),
    ("Llama-3", "right", f"## Step 1: Eggs sold\n{WORK}\n\n## Step 2: Money\n9 * 2 = 18.\n\n"
                         "The final answer is: $\\boxed{18}$"),
    ("Llama-3", "wrong", f"## Step 1: Eggs sold\n{WORK}\n\n## Step 2: Money\n9 * 2 = 16.\n\n"
                         "The final answer is: $\\boxed{16}$"),
    ("Minerva", "right", f"{WORK} She makes $9\\cdot 2=\\boxed{{18}}$ dollars.\n"
                         "Final Answer: The final answer is $18$. I hope it is correct."),
    ("Minerva", "box, then another final answer", f"{WORK} She makes $9\\cdot 2=\\boxed{{18}}$ dollars a day, "
                                                  "$\\boxed{{126}}$ a week.\nFinal Answer: The final answer is $126$. "
                                                  "I hope it is correct."),
    ("Mistral", "right", f"{WORK} She sells them for $2 each, so 9 * 2 = 18. The answer is 18."),
    ("Mistral", "wrong", f"{WORK} She sells them for $2 each, so 9 * 2 = 16. The answer is 16."),
    ("Phi", "right", "<think>\n16 - 3 - 4 = 9 eggs; 9 * 2 = 18.\n</think>\nJanet sells 9 eggs for $2 each.\n\n"
                     "**Final Answer:** $18"),
    ("SmolLM2", "right", f"<reasoning>\n{WORK}\n9 * 2 = 18\n</reasoning>\n<answer>\n18\n</answer>"),
    ("SmolLM2", "wrong", f"<reasoning>\n{WORK}\n9 * 2 = 18\n</reasoning>\n<answer>\n19\n</answer>"),
    ("GSM8K", "right", GSM8K_SOLUTION),
]


def _functions(source: str, names: tuple[str, ...], namespace: dict[str, Any]) -> dict[str, Any]:
    """The top-level ``def``/``class`` statements and assignments named ``names`` of ``source``, run as written in
    ``namespace``."""
    tree = ast.parse(source)
    wanted = [node for node in tree.body if (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names)
              or (isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets))]
    for node in wanted:
        node.decorator_list = [] if hasattr(node, "decorator_list") else None
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "<peer>", "exec"), namespace)
    return namespace


def lm_eval_graders(git_dir: str, commit: str) -> dict[str, Any]:
    task = yaml.safe_load(git(git_dir, "show", f"{commit}:lm_eval/tasks/gsm8k/gsm8k.yaml"))
    metric = next(m for m in task["metric_list"] if m["metric"] == "exact_match")
    ns: dict[str, Any] = {"re": re, "np": np, "string": string, "Filter": object, "Any": Any, "annotations": None}
    _functions(git(git_dir, "show", f"{commit}:lm_eval/filters/extraction.py"), ("RegexFilter",), ns)
    _functions(git(git_dir, "show", f"{commit}:lm_eval/api/metrics.py"), ("exact_match_hf_evaluate",), ns)
    options = {k: metric[k] for k in ("regexes_to_ignore", "ignore_case", "ignore_punctuation")}

    def gsm8k(filter_name: str):
        steps = next(f for f in task["filter_list"] if f["name"] == filter_name)["filter"]
        regex = next(s for s in steps if s["function"] == "regex")
        flt = ns["RegexFilter"](regex_pattern=regex["regex_pattern"], group_select=regex.get("group_select", 0))

        def grade(completion: str) -> float:
            prediction = flt.apply([[completion]], [{}])[0][0]  # take_first: the one response
            return float(ns["exact_match_hf_evaluate"]([prediction], [GSM8K_SOLUTION], **options)["exact_match"])
        return grade

    minerva_src = git(git_dir, "show", f"{commit}:lm_eval/tasks/minerva_math/utils.py")
    from math_verify import parse, verify
    mns: dict[str, Any] = {"re": re, "parse": parse, "verify": verify, "Optional": Any, "Dict": dict, "List": list}
    _functions(minerva_src, ("process_results", "last_boxed_only_string", "remove_boxed", "get_unnormalized_answer",
                             "normalize_final_answer", "SUBSTITUTIONS", "REMOVED_EXPRESSIONS", "is_equiv", "timeout"),
               mns)
    doc = {"solution": MATH_SOLUTION,
           "answer": mns["normalize_final_answer"](mns["remove_boxed"](mns["last_boxed_only_string"](MATH_SOLUTION)))}
    mns["is_equiv"] = lambda x1, x2: False  # replaced below when sympy's LaTeX parser runs here
    try:
        import sympy
        from sympy.parsing.latex import parse_latex
        parse_latex("1")
        mns.update(sympy=sympy, parse_latex=parse_latex, signal=__import__("signal"),
                   eval_logger=__import__("logging").getLogger("peer"))
        _functions(minerva_src, ("is_equiv", "timeout"), mns)
        exact = True
    except Exception:  # antlr4 4.11 missing: exact_match is not transcribed
        exact = False
    graders = {
        "gsm8k strict-match": ("lm_eval/tasks/gsm8k/gsm8k.yaml", gsm8k("strict-match"), {"answer": GSM8K_SOLUTION}, {}),
        "gsm8k flexible-extract": ("lm_eval/tasks/gsm8k/gsm8k.yaml", gsm8k("flexible-extract"),
                                   {"answer": GSM8K_SOLUTION}, {}),
        "minerva_math math_verify": ("lm_eval/tasks/minerva_math/utils.py",
                                     lambda c: float(mns["process_results"](doc, [c])["math_verify"]),
                                     {"answer": MATH_SOLUTION}, {"reference_extract": "boxed"}),
    }
    if exact:
        graders["minerva_math exact_match"] = ("lm_eval/tasks/minerva_math/utils.py",
                                               lambda c: float(mns["process_results"](doc, [c])["exact_match"]),
                                               {"answer": MATH_SOLUTION}, {"reference_extract": "boxed"})
    return graders


def simple_evals_graders(git_dir: str, commit: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"re": re}
    _functions(git(git_dir, "show", f"{commit}:mgsm_eval.py"), ("parse_answer", "score_mgsm"), ns)
    return {"mgsm": ("mgsm_eval.py", lambda c: float(ns["score_mgsm"]("18", ns["parse_answer"](c, "Answer"))),
                     {"answer": "18"}, {})}


QWEN_FILES = ("evaluation/parser.py", "evaluation/grader.py", "evaluation/utils.py", "evaluation/examples.py")
_QWEN_CHILD = """
import json, sys
from parser import extract_answer, parse_ground_truth
from grader import math_equal
gold = parse_ground_truth({"answer": sys.argv[1]}, "gsm8k")[1]
print(json.dumps([float(math_equal(extract_answer(c, "gsm8k"), gold)) for c in json.load(sys.stdin)]))
"""


def qwen_math_graders(git_dir: str, commit: str) -> dict[str, Any]:
    import os
    import subprocess
    import tempfile

    folder = tempfile.mkdtemp()
    for path in QWEN_FILES:
        with open(os.path.join(folder, os.path.basename(path)), "w", encoding="utf-8") as out:
            out.write(git(git_dir, "show", f"{commit}:{path}"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ["QWEN_EVAL_DEPS"], folder])}
    completions = [c for _, _, c in OUTPUTS]
    verdicts = json.loads(subprocess.run([sys.executable, "-c", _QWEN_CHILD, GSM8K_SOLUTION], input=json.dumps(
        completions), env=env, cwd=folder, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    by_completion = dict(zip(completions, verdicts, strict=True))
    return {"math_equal": ("evaluation/grader.py", by_completion.__getitem__, {"answer": GSM8K_SOLUTION}, {})}


#: the graders' deliberate differences from ours: (grader, family) -> key of DELIBERATE
DIFFERENCES = {
    "gsm8k strict-match": "strict_match_reads_only_hashes",
    "minerva_math exact_match": "minerva_reads_only_its_sentence",
    "mgsm": "mgsm_reads_after_answer",
}
DELIBERATE = {
    "strict_match_reads_only_hashes": {
        "reward": "exact_match",
        "documented_in": "docs/answers.md",
        "phrase": "lm-evaluation-harness's gsm8k `strict-match` reads only a `#### N` line",
        "reason": "lm-evaluation-harness's gsm8k strict-match filter reads only a '#### N' line; exact_match reads "
                  "every answer marker (tags, boxes, answer lines)"},
    "minerva_reads_only_its_sentence": {
        "reward": "exact_match",
        "documented_in": "docs/answers.md",
        "phrase": "minerva_math's `exact_match` reads only Minerva's sentence",
        "reason": "lm-evaluation-harness's minerva_math exact_match reads only Minerva's 'Final Answer: The final "
                  "answer is X. I hope it is correct.'; exact_match reads every answer marker"},
    "mgsm_reads_after_answer": {
        "reward": "exact_match",
        "documented_in": "docs/answers.md",
        "phrase": "simple-evals' MGSM grader reads the last number after the last `Answer`",
        "reason": "simple-evals' MGSM grader reads the last number after the last 'Answer' (capitalised) and "
                  "nothing without it; exact_match reads the final answer of every format"},
}


def main() -> None:
    which, git_dir, commit = sys.argv[1:4]
    commit = git(git_dir, "rev-parse", commit).strip()
    repo, graders = {"lm_eval": ("https://github.com/EleutherAI/lm-evaluation-harness", lm_eval_graders),
                     "simple_evals": ("https://github.com/openai/simple-evals", simple_evals_graders),
                     "qwen_math": ("https://github.com/QwenLM/Qwen2.5-Math", qwen_math_graders)}[which]
    graders = graders(git_dir, commit)
    import grpo_rewards

    cases, used = [], {}
    for grader, (path, grade, columns, config) in graders.items():
        ours_fn = grpo_rewards.reward("exact_match", value=1.0, **config)
        for family, variant, completion in OUTPUTS:
            expected = grade(completion)
            ours = ours_fn([completion], **{k: [v] for k, v in columns.items()})[0]
            case = {"id": f"{grader}[{family}: {variant}]", "test": f"{path}::{grader}", "peer": grader,
                    "reward": "exact_match", "config": {"value": 1.0, **config}, "completion": completion,
                    "columns": columns, "expected": expected, "format": FORMATS[family],
                    "source": f"{repo}/blob/{commit}/{path}"}
            if ours != expected:
                key = DIFFERENCES.get(grader)
                if key is None:
                    raise SystemExit(f"{case['id']}: ours {ours}, the grader {expected}, and no reason is recorded")
                used[key] = DELIBERATE[key]
                case.update(deliberate=key, ours=ours, reason=DELIBERATE[key]["reason"])
            cases.append(case)
    files = sorted({path for path, *_ in graders.values()})
    if which == "lm_eval":
        files = sorted({*files, "lm_eval/filters/extraction.py", "lm_eval/api/metrics.py"})
    if which == "qwen_math":
        files = sorted(QWEN_FILES)
    suites = {"lm_eval": "lm-evaluation-harness graders", "simple_evals": "simple-evals graders",
              "qwen_math": "Qwen2.5-Math's grader"}
    print(json.dumps({"suite": suites[which],
                      "source": {"repo": repo, "commit": commit, "files": files,
                                 "transcribed_by": "tests/conformance/tools/transcribe_graders.py"},
                      "deliberate": used, "not_covered": [], "cases": cases}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
