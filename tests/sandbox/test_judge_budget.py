"""Judging a program's output costs time linear in its size: worst-case reports and stdout at the full
output cap are judged within a small fixed budget each, on the trainer's own thread (no sandbox needed).

The cases run in a child interpreter with a timeout, so a quadratic parser fails the test instead of
holding it for an hour.
"""

from __future__ import annotations

import json
import subprocess
import sys

BUDGET = 0.5  # CPU seconds of the judging thread per output of 1 MiB (a linear parser needs ~0.01-0.3)

CASES = r'''
import json, sys, time
from grpo_rewards.sandbox.judge import MAX_REPORT_CHARS, Prepared, judge, parse_report
from grpo_rewards.sandbox.program import Program, RunResult
from grpo_rewards.sandbox.tests_formats import CallCase, StdioCase

CAP = MAX_REPORT_CHARS  # the output cap: 1 MiB
nonce = "ab" * 12


def fill(head, unit, tail=""):
    return head + unit * ((CAP - len(head) - len(tail) - len(nonce) - 2) // len(unit)) + tail


reports = {
    "escaped_quotes_open": fill('"', '\\"'),
    "escaped_quotes_closed": fill('{"value": "', '\\"', '"}'),
    "backslashes": fill('{"value": "', '\\\\', '"}'),
    "unicode_escapes": fill('{"value": "', '\\u00e9', '"}'),
    "digit_run": fill('{"value": ', '9', '}'),
    "digit_run_then_junk": fill('{"value": ', '9', 'x'),
    "numbers_just_under_the_bound": fill('{"value": [', '9' * 4300 + ',', '1]}'),
    "long_floats": fill('{"value": [', '1.' + '5' * 9997 + ',', '1]}'),
    "many_floats": fill('{"value": [', '1.5,', '1]}'),
    "exponent_runs": fill('{"value": [', '1e' + '9' * 3997 + ',', '1]}'),
    "many_small_ints": fill('{"value": [', '7,', '7]}'),
    "deep_lists": fill('{"value": ', '['),
    "deep_dicts": fill('{"value": ', '{"a":'),
    "closed_deep_lists": '{"value": ' + '[' * (CAP // 2 - 40) + ']' * (CAP // 2 - 40) + '}',
    "whitespace": fill('{"value":', ' ', '1}'),
    "brackets_in_strings": fill('{"value": "', '[{', '"}'),
}
out = {}
case = CallCase("f", [1], 3)
for name, payload in reports.items():
    stdout = nonce + " " + payload + "\n"
    assert len(stdout) <= CAP + 1, (name, len(stdout))
    t0 = time.thread_time()
    outcome = judge(case, Prepared(Program(""), nonce), RunResult("ok", stdout=stdout))
    out[name] = [time.thread_time() - t0, outcome.status]

# stdin/stdout judging with a float tolerance: tokens compared as numbers
want = "1.5\n"
stdio = {
    "digit_token_then_junk": fill("", "9", "x"),
    "many_long_tokens": fill("", "9" * 3999 + "x "),
    "dotted_runs": fill("", "1" * 1000 + "." + "e "),
}
for name, text in stdio.items():
    t0 = time.thread_time()
    outcome = judge(StdioCase("", want), Prepared(Program(""), ""), RunResult("ok", stdout=text),
                    float_tolerance=1e-6)
    out["stdio_" + name] = [time.thread_time() - t0, outcome.status]
sys.set_int_max_str_digits(0)  # a trainer that turned Python's own limit off
for name in ("digit_run", "numbers_just_under_the_bound", "many_small_ints"):
    stdout = nonce + " " + reports[name] + "\n"
    t0 = time.thread_time()
    outcome = judge(case, Prepared(Program(""), nonce), RunResult("ok", stdout=stdout))
    out["no_int_limit_" + name] = [time.thread_time() - t0, outcome.status]
print("RESULT " + json.dumps(out))
'''


def test_worst_case_outputs_at_the_cap_are_judged_within_a_budget():
    proc = subprocess.run([sys.executable, "-c", CASES], capture_output=True, text=True, timeout=60)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, proc.stderr[-2000:]
    results = json.loads(line[7:])
    assert len(results) == 22
    slow = {name: round(seconds, 3) for name, (seconds, _) in results.items() if seconds > BUDGET}
    assert slow == {}, slow
    assert all(status == "wrong" for _, status in results.values()), results


def test_crafted_reports_are_refused_and_honest_ones_kept():
    from grpo_rewards.sandbox.judge import MAX_REPORT_DEPTH, parse_report

    assert parse_report('{"value": ' + "9" * 5000 + "}") is None
    assert parse_report('{"value": 1' + "0" * 5000 + ".5}") == {"value": float("inf")}  # float() is linear
    assert parse_report('{"value": ' + "[" * 50000 + "]" * 50000 + "}") is None
    assert parse_report("[" * (MAX_REPORT_DEPTH + 1) + "]" * (MAX_REPORT_DEPTH + 1)) is None
    assert parse_report("[" * MAX_REPORT_DEPTH + "]" * MAX_REPORT_DEPTH) is not None
    assert parse_report('{"value": "' + "[" * 5000 + '"}') == {"value": "[" * 5000}  # brackets in a string
    assert parse_report('{"value": ' + "9" * 4300 + "}") == {"value": int("9" * 4300)}
    assert parse_report('{"value": ' + "9" * 4301 + "}") is None
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        assert parse_report('{"value": ' + "9" * 4301 + "}") is None  # refused by the hook then
        assert parse_report('{"value": -' + "9" * 4300 + "}") == {"value": -int("9" * 4300)}
    finally:
        sys.set_int_max_str_digits(before)
    assert parse_report('{"value": [1.5, -2e3, "a\\"b", {"k": null}, true]}') == {
        "value": [1.5, -2000.0, 'a"b', {"k": None}, True]}
    assert parse_report('{"value": 3') is None and parse_report('"' + '\\"' * 1000) is None
