"""The template a zygote forks every child from: the zygote is each child's parent, by ``CLONE_PARENT`` or,
where the kernel refuses that flag, through an intermediate that exits at once (the child is reparented to
the zygote, its subreaper). Run in a process standing in for a zygote."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import needs_default

pytestmark = needs_default

SCRIPT = r"""
import json, os, signal, sys, tempfile
from grpo_rewards.sandbox.jail import template, zygote
from grpo_rewards.sandbox.jail.linux import PR_SET_CHILD_SUBREAPER, prctl
if sys.argv[1] == "refused":
    def refused():
        raise OSError(22, "clone(CLONE_PARENT): refused")
    template.fork_sibling = refused
prctl(PR_SET_CHILD_SUBREAPER, 1)
root = tempfile.mkdtemp()
ctx = zygote.Context(os.getpid(), None, None, 0, [], None)
t = template.Template(ctx, root, [])
out = []
for _ in range(3):
    spare = t.spare()
    with open(f"/proc/{spare.pid}/stat") as fh:
        ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
    out.append({"parent_is_us": ppid == os.getpid(), "scratch": os.path.isdir(spare.scratch),
                "name": os.path.basename(spare.scratch)})
    spare.sock.close()  # EOF: the spare ends without a run
    os.waitpid(spare.pid, 0)  # ours to reap
    os.close(spare.rd_r)
    os.rmdir(spare.scratch)
only = zygote._only_child(t.pid)
t.close()
print("RESULT " + json.dumps({"spares": out, "only_template_left": only}))
"""


@pytest.mark.parametrize("clone", ["sibling", "refused"])
def test_every_spare_is_the_zygotes_child(clone):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, clone], capture_output=True, text=True, timeout=60)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, proc.stderr[-2000:]
    res = json.loads(line[7:])
    assert [s["parent_is_us"] and s["scratch"] for s in res["spares"]] == [True] * 3, res
    names = [s["name"] for s in res["spares"]]
    assert len(set(names)) == 3 and all(len(n) == 17 for n in names), names  # random: no count of runs
    assert res["only_template_left"], res
