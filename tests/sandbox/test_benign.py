"""The benign suite: honest programs must pass under the limits (they must not break good code)."""

from __future__ import annotations

import importlib.util

import pytest

from grpo_rewards.sandbox.program import Limits, Program

from .conftest import needs_default

pytestmark = needs_default

HEAVY_STDIN = "\n".join(str(i) for i in range(400_000)) + "\n"  # ~2.7 MB

BENIGN: dict[str, tuple[str, str, str]] = {  # name -> (program, stdin, expected stdout)
    "threads": ("import threading\nout = [0] * 16\ndef work(i):\n    out[i] = sum(range(i * 1000))\n"
                "ts = [threading.Thread(target=work, args=(i,)) for i in range(16)]\n"
                "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(sum(out))",
                "", str(sum(sum(range(i * 1000)) for i in range(16))) + "\n"),
    "thread_pool": ("from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(8) as ex:\n"
                    "    print(sum(ex.map(lambda x: x * x, range(1000))))", "", f"{sum(x * x for x in range(1000))}\n"),
    "deep_recursion": ("import sys\nsys.setrecursionlimit(30000)\ndef depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
                       "print(depth(20000))", "", "20000\n"),
    "large_legal_output": ("import sys\nfor i in range(60000):\n    sys.stdout.write(f'{i:>10}\\n')", "",
                           "".join(f"{i:>10}\n" for i in range(60000))),
    "unicode": ("s = input()\nprint(s[::-1], len(s))\nprint('ünïcödé ✓ 漢字 🎉')", "héllo wörld 漢\n",
                "漢 dlröw olléh 13\nünïcödé ✓ 漢字 🎉\n"),
    "heavy_stdin": ("import sys\nprint(sum(int(x) for x in sys.stdin))", HEAVY_STDIN, f"{sum(range(400_000))}\n"),
    "input_loop": ("n = int(input())\nprint(sum(int(input()) for _ in range(n)))", "3\n1\n2\n3\n", "6\n"),
    "stdlib_not_preloaded": ("import sqlite3, xml.etree.ElementTree as ET, csv, zlib, difflib, fractions\n"
                             "db = sqlite3.connect(':memory:')\nprint(db.execute('select 6*7').fetchone()[0])\n"
                             "print(ET.fromstring('<a>hi</a>').text, zlib.crc32(b'x') > 0)", "", "42\nhi True\n"),
    "scratch_files": ("import os, tempfile\nopen('data.txt', 'w').write('abc')\nprint(open('data.txt').read())\n"
                      "with tempfile.NamedTemporaryFile('w+') as f:\n    f.write('tmp'); f.seek(0); print(f.read())\n"
                      "os.mkdir('d'); os.rename('data.txt', 'd/data.txt'); print(os.listdir('d'))",
                      "", "abc\ntmp\n['data.txt']\n"),
    "asyncio": ("import asyncio\nasync def f(x):\n    await asyncio.sleep(0.01)\n    return x * 2\n"
                "async def main():\n    return await asyncio.gather(*(f(i) for i in range(5)))\n"
                "print(asyncio.run(main()))", "", "[0, 2, 4, 6, 8]\n"),
    "exit_zero_explicit": ("import sys\nprint('bye')\nsys.exit(0)", "", "bye\n"),
    "big_list": ("x = list(range(5_000_000))\nprint(len(x), x[-1])", "", "5000000 4999999\n"),
    "socketpair": ("import socket\na, b = socket.socketpair()\na.sendall(b'ping')\nprint(b.recv(4).decode())", "",
                   "ping\n"),
}


@pytest.fixture(scope="module")
def benign_results(box):
    names = list(BENIGN)
    limits = Limits(cpu_seconds=5, wall_seconds=10, memory_mb=1024)
    results = box.run([Program(BENIGN[n][0], BENIGN[n][1], limits=limits) for n in names])
    return dict(zip(names, results, strict=True))


@pytest.mark.parametrize("name", list(BENIGN))
def test_honest_program_passes(benign_results, name):
    r = benign_results[name]
    assert r.status == "ok", f"{name}: {r.status} {r.error} {r.stderr[-500:]}"
    assert r.stdout == BENIGN[name][2]


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy not installed")
def np_version() -> str:
    import numpy

    return numpy.__version__


def test_numpy():
    """numpy when the allow-list names it (its vendored ``numpy.libs`` come with it); never without."""
    from grpo_rewards.sandbox.pool import LocalSandbox

    code = "import numpy as np\na = np.arange(12, dtype=np.float64).reshape(3, 4)\nprint(int((a @ a.T).sum()))"
    limits = Limits(cpu_seconds=10, wall_seconds=20, memory_mb=1024)
    with LocalSandbox(slots=1, limits=limits, packages=["numpy"]) as box:
        r = box.run_one(Program(code))
        version = box.run_one(Program("import importlib.metadata\nprint(importlib.metadata.version('numpy'))"))
    assert (version.status, version.stdout) == ("ok", np_version() + "\n"), version.stderr[-300:]
    with LocalSandbox(slots=1, limits=limits) as box:
        refused = box.run_one(Program(code))
    assert refused.status == "runtime_error" and "ModuleNotFoundError" in refused.stderr
    import numpy as np

    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert (r.status, r.stdout) == ("ok", f"{int((a @ a.T).sum())}\n"), r.stderr[-500:]


def test_runs_are_independent(box):
    """A fresh child per run: state, files and random seeds do not carry over."""
    first, second = box.run([Program("import random, os\nopen('left.txt', 'w').write('x')\nprint(random.random())"),
                             Program("import os, random\nprint(os.path.exists('left.txt'), random.random())")])
    assert first.status == second.status == "ok"
    assert second.stdout.split()[0] == "False"
    assert first.stdout.strip() != second.stdout.split()[1]


def test_statuses(box):
    rs = box.run([Program("raise ValueError('boom')"), Program("import sys\nsys.exit(3)"), Program("print(1"),
                  Program("import os\nos.abort()")])
    assert [r.status for r in rs] == ["runtime_error"] * 4
    assert "ValueError: boom" in rs[0].stderr and rs[1].exit_code == 3 and "SyntaxError" in rs[2].stderr
    assert rs[3].signal == 6
