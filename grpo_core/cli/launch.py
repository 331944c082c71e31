"""``grpo train CONFIG --nproc N``: the run, already checked once, started on N processes as ``torchrun
--standalone --nproc_per_node N -m grpo_core train CONFIG ...`` (:func:`launch`); under torchrun
(``WORLD_SIZE`` set) each rank runs ``grpo train`` itself (:mod:`grpo_core.cli.commands.train`), rank 0
alone checking and clearing the run folder and printing. A Ctrl-C is handed to the ranks, which checkpoint
and stop.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from grpo_core.run_folder.lock import INHERITED

LAUNCHED = "GRPO_LAUNCHED"  # set for the ranks started by ``grpo train --nproc``


def launch(args: argparse.Namespace) -> int:
    """Run this ``grpo train`` on ``args.nproc`` processes through ``torch.distributed.run``; its exit status
    (torchrun's: 0, or 1 when a rank failed, each rank printing its own error first), 130 after a Ctrl-C.

    torchrun is started with SIGINT ignored and told not to handle it (``--signals-to-handle`` without SIGINT);
    its ranks run in sessions of their own, so a Ctrl-C reaches this process and torchrun only, and this
    process hands it to the ranks (torchrun's children), which stop as one process does: they finish the
    step, checkpoint and exit (a second Ctrl-C stops them at once). The ranks
    then exit with 0 (``GRPO_LAUNCHED`` tells them torchrun was started here), so torchrun does not report a
    failure, and this returns 130."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
               "--signals-to-handle=SIGTERM,SIGHUP,SIGQUIT", "-m", "grpo_core", "train", args.config]
    for override in args.overrides:
        command += ["--set", override]
    command += ["--resume"] if args.resume else ["--overwrite"] if args.overwrite else []
    if threading.current_thread() is threading.main_thread():  # started with SIGINT ignored (a shell's background
        signal.signal(signal.SIGINT, signal.default_int_handler)  # job, CI), Ctrl-C still stops it as it does a rank
    proc = subprocess.Popen(command, env={**os.environ, LAUNCHED: "1", INHERITED: "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    interrupted = False
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:  # hand it to the ranks: they finish the step, checkpoint and exit
            interrupted = True
            for pid in child_pids(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)
    return 130 if interrupted else code


def child_pids(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (Linux ``/proc``; none found elsewhere)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return [pid for pid in found if pid != os.getpid()]
