"""A memory and pids cgroup per slot: memory accounted as the kernel does, tasks capped per slot.

RLIMIT_AS bounds what a program maps; pages it holds without mapping them (a memfd's,
a tmpfs file's, pipe buffers) are outside it. A memory cgroup charges every page the
run allocates, mapped or not, so each slot gets one with ``memory_mb`` as its limit and
no swap, and a pids cgroup with ``processes`` as its task limit (threads count).

The pool (root, or a user the cgroup tree is delegated to) makes the folders under its
own cgroup (:class:`PoolCgroups`) and hands each zygote open directory fds
(:func:`for_slot`): the zygote reaches the files through them with ``openat``, which
works inside bubblewrap's read-only root too. The zygote moves itself in once, when it
is set up (:meth:`SlotCgroup.join`; what it allocated before stays charged to the pool's
cgroup), so every child it forks starts there: moving each child in would cost a
cgroup migration per run. The OOM killer picks the program, never the zygote: each
child raises its ``oom_score_adj`` to 1000 (raising needs no privilege; a memfd's pages
are not in its resident size, which would otherwise make the zygote look bigger). Per run it sets the limits
(:meth:`SlotCgroup.set_limits`; the task limit counts the zygote and its template too) and, after a run
its child ended killed, asks whether the kernel's OOM killer did it
(:meth:`SlotCgroup.oom_kills`). cgroup v1 (``memory`` and ``pids``
hierarchies) and v2 (a cgroup whose ``subtree_control`` can enable ``memory`` and
``pids``) are both handled; where neither can be made, there is no cgroup and the
seccomp filter refuses ``memfd_create`` instead.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time

MB = 1 << 20
PREFIX = "grpo-sandbox-"


def _own_paths() -> dict[str, str]:
    """controller ("memory", "pids", or "" for the v2 tree) -> this process's cgroup path in it."""
    out = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            hid, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(","):
                out["" if hid == "0" and not controllers else name] = path
    return out


def _mounts() -> dict[str, tuple[str, str]]:
    """controller ("memory", "pids", or "" for cgroup2) -> (mount point, root of the mount)."""
    out: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields, (fstype, _source, options) = left.split(), right.split(" ", 2)
            root, point = fields[3], fields[4].replace("\\040", " ")
            if fstype == "cgroup2":
                out.setdefault("", (point, root))
            elif fstype == "cgroup":
                for name in ("memory", "pids"):
                    if name in options.split(","):
                        out.setdefault(name, (point, root))
    return out


def _host_path(mount: tuple[str, str], path: str) -> str | None:
    point, root = mount
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None
    rel = path[len(root):] if root != "/" else path
    return os.path.join(point, rel.lstrip("/"))


def _rmdir(path: str, patience: float = 0.0) -> bool:
    """Remove a cgroup folder; while it is busy (a child of a zygote that just ended is still exiting), retry
    for up to ``patience`` seconds. Whether it is gone."""
    end = time.monotonic() + patience
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > end:
                return False
            time.sleep(0.01)


def _remove_stale(parent: str) -> None:
    """Remove the cgroup folders of pools whose process is gone (killed before they could close)."""
    with contextlib.suppress(OSError), os.scandir(parent) as it:
        for entry in it:
            owner = entry.name[len(PREFIX):].split("-", 1)[0]
            if not entry.name.startswith(PREFIX) or not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                continue
            with contextlib.suppress(OSError), os.scandir(entry.path) as slots:
                for slot in slots:
                    if slot.is_dir() and slot.name.startswith("slot"):
                        _rmdir(slot.path)
            _rmdir(entry.path)


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class PoolCgroups:
    """The pool's cgroup folders: ``<own cgroup>/grpo-sandbox-<pid>-<random>/slot<i>`` per controller.

    ``version`` is 1 or 2, or 0 with ``why`` when none could be made (then :attr:`slots` is empty).
    """

    def __init__(self, slots: int, owner: int | None = None) -> None:
        self.version = 0
        self.why = ""
        self.swap = False
        self.bases: list[str] = []  # the grpo-sandbox-<pid> folders, removed at close
        self.slots: list[dict[str, str]] = []  # per slot: controller -> folder
        self.retired: list[str] = []  # folders of slots renewed while they were still busy
        self._renewals = 0
        owner = os.getpid() if owner is None else owner
        self.name = f"{PREFIX}{owner}-{os.urandom(4).hex()}"  # two pools of one process: two folders
        try:
            own, mounts = _own_paths(), _mounts()
        except OSError as exc:
            self.why = f"cgroups unreadable: {exc}"
            return
        try:
            if "memory" in mounts and "memory" in own and "pids" in mounts and "pids" in own:
                self._make_v1(slots, own, mounts)
            elif "" in mounts and "" in own:
                self._make_v2(slots, own[""], mounts[""])
            else:
                self.why = "no memory and pids cgroup controllers mounted"
        except OSError as exc:
            self.close()
            self.why = f"cannot make cgroups: {exc}"

    def _make_v1(self, slots: int, own: dict[str, str], mounts: dict[str, tuple[str, str]]) -> None:
        parents = {}
        for name in ("memory", "pids"):
            parent = _host_path(mounts[name], own[name])
            if parent is None or not os.access(parent, os.W_OK):
                raise OSError(f"{name} cgroup {own[name]} is not writable")
            parents[name] = parent
        for parent in parents.values():
            _remove_stale(parent)
            base = os.path.join(parent, self.name)
            os.mkdir(base)
            self.bases.append(base)
        self.swap = os.path.exists(os.path.join(self.bases[0], "memory.memsw.limit_in_bytes"))
        self.version = 1
        for i in range(slots):
            self.slots.append(self._make_slot(f"slot{i}"))

    def _make_v2(self, slots: int, own: str, mount: tuple[str, str]) -> None:
        parent = _host_path(mount, own)
        if parent is None:
            raise OSError(f"cgroup {own} is outside the cgroup2 mount")
        with open(os.path.join(parent, "cgroup.controllers")) as fh:
            offered = fh.read().split()
        if not {"memory", "pids"} <= set(offered):
            raise OSError(f"cgroup {own} does not offer memory and pids ({' '.join(offered)})")
        _remove_stale(parent)
        base = os.path.join(parent, self.name)
        # a cgroup with processes (this one) cannot enable controllers for its children unless it is the root:
        # enabling fails with EBUSY then, and there is no cgroup
        with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
            enabled = set(fh.read().split())
        if not {"memory", "pids"} <= enabled:
            _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
        os.mkdir(base)
        self.bases.append(base)
        _write(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
        self.swap = True
        self.version = 2
        for i in range(slots):
            self.slots.append(self._make_slot(f"slot{i}"))

    def _make_slot(self, name: str) -> dict[str, str]:
        """Make one slot's folders (controller -> folder) under the pool's bases."""
        if self.version == 1:
            folders = {}
            for controller, base in zip(("memory", "pids"), self.bases):
                folders[controller] = os.path.join(base, name)
                os.mkdir(folders[controller])
            return folders
        folder = os.path.join(self.bases[0], name)
        os.mkdir(folder)
        _write(os.path.join(folder, "memory.swap.max"), "0")
        return {"memory": folder, "pids": folder}

    def renew(self, index: int) -> None:
        """Give slot ``index`` fresh folders (its zygote has ended: a cgroup whose limits could not be set, say
        one still charged with pages that outlived their run). The old ones are removed now, or at close."""
        self._renewals += 1
        old, self.slots[index] = self.slots[index], self._make_slot(f"slot{index}-{self._renewals}")
        for path in dict.fromkeys(old.values()):
            if not _rmdir(path, patience=0.5):
                self.retired.append(path)

    def for_slot(self, index: int) -> dict[str, object] | None:
        """Open directory fds of slot ``index``'s cgroups, for the zygote (``pass_fds``); None without cgroups.
        The caller closes ``fds`` once the zygote has them."""
        if not self.version:
            return None
        fds = {name: os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
               for name, path in self.slots[index].items()}
        return {"version": self.version, "swap": self.swap, "fds": fds}

    def close(self) -> None:
        """Remove the folders (the zygotes have ended; a child of theirs may still be exiting: retried for
        two seconds; what is left then, the next pool removes)."""
        for folders in self.slots:
            for path in dict.fromkeys(folders.values()):
                _rmdir(path, patience=2.0)
        for path in self.retired:
            _rmdir(path, patience=0.5)
        self.slots, self.retired = [], []
        for base in self.bases:
            _rmdir(base, patience=2.0)
        self.bases = []


class SlotCgroup:
    """The zygote's side: one slot's memory and pids cgroups, reached through directory fds."""

    def __init__(self, spec: dict[str, object]) -> None:
        self.version = int(spec["version"])  # type: ignore[call-overload]
        self.swap = bool(spec["swap"])
        fds: dict[str, int] = spec["fds"]  # type: ignore[assignment]
        mem, pids = fds["memory"], fds["pids"]
        self._procs = [os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=fd) for fd in dict.fromkeys((mem, pids))]
        v1 = self.version == 1
        self._limit = os.open("memory.limit_in_bytes" if v1 else "memory.max", os.O_WRONLY | os.O_CLOEXEC, dir_fd=mem)
        self._memsw = (os.open("memory.memsw.limit_in_bytes", os.O_WRONLY | os.O_CLOEXEC, dir_fd=mem)
                       if v1 and self.swap else -1)
        self._pids_max = os.open("pids.max", os.O_WRONLY | os.O_CLOEXEC, dir_fd=pids)
        self._events = os.open("memory.oom_control" if v1 else "memory.events", os.O_RDONLY | os.O_CLOEXEC, dir_fd=mem)
        for fd in dict.fromkeys((mem, pids)):
            os.close(fd)
        self._memory = -1
        self._tasks = -1

    def set_limits(self, memory_bytes: int, tasks: int) -> None:
        """The next run's memory (no swap) and task limits (the zygote's and its template's tasks are added);
        written only when they change."""
        tasks += 2
        if memory_bytes != self._memory:
            value = str(memory_bytes).encode()
            if self._memsw < 0:
                os.pwrite(self._limit, value, 0)
            else:  # v1: memory+swap may never be below memory
                if self._memory < 0:  # what an earlier zygote of this slot left is unknown: lift memory+swap
                    os.pwrite(self._memsw, b"-1", 0)
                if self._memory < 0 or memory_bytes < self._memory:  # lowering: memory first
                    os.pwrite(self._limit, value, 0)
                    os.pwrite(self._memsw, value, 0)
                else:
                    os.pwrite(self._memsw, value, 0)
                    os.pwrite(self._limit, value, 0)
            self._memory = memory_bytes
        if tasks != self._tasks:
            os.pwrite(self._pids_max, str(tasks).encode(), 0)
            self._tasks = tasks

    def join(self) -> None:
        """Move this process (the zygote) into the slot's cgroups, where the OOM killer never picks it (nor the
        template forked from it next): a program killed for holding memfd pages frees them only as it exits,
        and an allocation meanwhile must wait, not kill the zygote."""
        for fd in self._procs:
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("-1000")

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in this cgroup so far."""
        text = os.pread(self._events, 4096, 0).decode()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def close(self) -> None:
        for fd in (*self._procs, self._limit, self._memsw, self._pids_max, self._events):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
