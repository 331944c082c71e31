"""The shared pieces behind the bad-input promise: atomic writes, the output-vs-input check, strict text
reading, and the one top-level handler (bad input: exit 2, one line per problem; a bug: exit 1, one line,
the traceback only with --debug)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from grpo_rewards.errors import ConfigError, Problem, UserError
from grpo_rewards.files import atomic_write, check_output, read_text


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    with pytest.raises(RuntimeError), atomic_write(target) as fh:
        fh.write("half of the new")
        raise RuntimeError("killed half way")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["out.jsonl"]  # no temporary left behind
    with atomic_write(target) as fh:
        fh.write("new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["out.jsonl"]
    assert target.stat().st_mode & 0o777 == 0o640  # the file's permissions are kept


def test_check_output_refuses_inputs_by_any_path(tmp_path: Path) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text("{}\n")
    (tmp_path / "link.jsonl").symlink_to(src)
    for out in (src, tmp_path / "sub" / ".." / "rows.jsonl", tmp_path / "link.jsonl"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(UserError, match="is also an input"):
            check_output(out, [src])
    assert check_output(tmp_path / "other.jsonl", [src]) == tmp_path / "other.jsonl"


def test_read_text_names_line_and_column_of_a_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_bytes(b"a = 1\nb = '\xe9t\xe9'\n")
    with pytest.raises(ConfigError) as info:
        read_text(path, ConfigError)
    assert str(info.value) == f"{path}:2: not UTF-8 text (byte 0xe9 at column 6); save the file as UTF-8"


def test_problem_lines() -> None:
    assert str(Problem("f.toml", 3, "grpo.beta", "bad")) == "f.toml:3: grpo.beta: bad"
    assert str(Problem("--batch-size", None, "", "must be >= 1")) == "--batch-size: must be >= 1"
    assert str(UserError("no such thing", key="model.x")) == "model.x: no such thing"


def test_one_handler_bad_input_exit_2_bug_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import grpo_rewards.reward_commands as commands
    from grpo_rewards.command_line import main

    def bad_input(args: object) -> int:
        raise ConfigError([Problem("a.toml", 1, "x", "first"), Problem("a.toml", 2, "y", "second")])

    def bug(args: object) -> int:
        raise KeyError("oops")

    monkeypatch.setattr(commands, "cmd_rewards_list", bad_input)
    assert main(["rewards", "list"]) == 2
    assert capsys.readouterr().err == "a.toml:1: x: first\na.toml:2: y: second\n"
    monkeypatch.setattr(commands, "cmd_rewards_list", bug)
    assert main(["rewards", "list"]) == 1
    err = capsys.readouterr().err
    line = bug.__code__.co_firstlineno + 1  # where it raised
    assert len(err.splitlines()) == 1
    assert re.fullmatch(rf"internal error: KeyError: 'oops' at (\S+/)?test_files_and_handler\.py:{line} in bug \(a bug: "
                        r"please report it; run again with --debug for the traceback\)\n", err), err

    assert main(["--debug", "rewards", "list"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.splitlines()[-1].startswith("internal error: KeyError")

    def library_bug(args: object) -> int:
        return json.loads("{")  # raised inside the standard library: the line named is this one, its caller

    monkeypatch.setattr(commands, "cmd_rewards_list", library_bug)
    assert main(["rewards", "list"]) == 1
    err = capsys.readouterr().err
    line = library_bug.__code__.co_firstlineno + 1
    assert re.search(rf" at (\S+/)?test_files_and_handler\.py:{line} in library_bug \(a bug", err), err


def test_atomic_write_follows_links_and_never_replaces_a_device(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with atomic_write(link) as fh:
        fh.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    import threading

    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    with atomic_write(fifo) as fh:
        fh.write("through the pipe\n")
    reader.join(10)
    assert got == [b"through the pipe\n"] and not fifo.is_file()  # still a pipe, not replaced by a file


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(f'{{"step": {i}, "kl": {i / 10}}}\n' for i in range(1, 6)))
    return run


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc, where no file can be made")
def test_plot_out_where_no_file_can_be_made_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    run = _run_dir(tmp_path)
    assert main(["plot", str(run), "--out", "/proc/curves.png"]) == 2  # refused even as root
    err = capsys.readouterr().err
    assert err.startswith("--out: cannot write /proc/curves.png: ") and len(err.splitlines()) == 1, err


def test_plot_on_a_full_disk_is_one_line_and_leaves_the_old_png(tmp_path: Path) -> None:
    """A file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes the PNG's write fail as a full disk does."""
    import subprocess
    import sys

    run = _run_dir(tmp_path)
    (run / "curves.png").write_bytes(b"old png")
    script = ("import resource, signal, sys\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))\n"
              "from grpo_rewards.command_line import main\n"
              f"sys.exit(main(['plot', {str(run)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"--out: cannot write {run / 'curves.png'}: File too large"]
    assert (run / "curves.png").read_bytes() == b"old png"
    assert sorted(p.name for p in run.iterdir()) == ["curves.png", "metrics.jsonl"]  # no temporary left


def test_check_output_accepts_a_writable_device_and_probes_the_folder(tmp_path: Path) -> None:
    assert check_output("/dev/null", [tmp_path / "in.jsonl"]) == Path("/dev/null")
    assert check_output(tmp_path / "o.jsonl", []) == tmp_path / "o.jsonl"
    assert os.listdir(tmp_path) == []  # the probe file is removed
