"""The error types a user's input can cause, one per layer, all printed by the ``grpo`` shell the same way.

Each carries one or more :class:`Problem` (``file:line: key: what is wrong``); ``str()`` gives one line per
problem. The ``grpo`` command line prints them and exits with status 2, never a traceback.

    UserError           the common base (catch this to catch them all)
      ConfigError       a run or rewards config (TOML, ``--set``, a command-line option)
      RewardInputError  a file given to ``grpo rewards score`` (and its ``--output``)
      DataError         (``grpo_core.data``) a training data set
      RunFolderError    (``grpo_core.run_folder.checkpoints``) a run folder: an earlier run, a file in the way, no access

``file`` is a path, or a label for where else the value came from (``--set grpo.beta=x``, ``--batch-size``).

:class:`ServiceError` is the one failure that is neither bad input nor a bug: a service the run depends on
(a vLLM server) stopped answering while it ran. ``grpo`` prints it in one line and exits with status 1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.file and self.line else self.file
        return ": ".join(part for part in (where, self.key, self.message) if part)


class UserError(Exception):
    """Bad input: one or more :class:`Problem`; ``str()`` gives one line per problem."""

    def __init__(self, problems: list[Problem] | str, *, file: str = "", line: int | None = None, key: str = ""):
        if isinstance(problems, str):
            problems = [Problem(str(file), line, key, problems)]
        self.problems = list(dict.fromkeys(problems))  # the same problem twice (a shared default) once
        super().__init__("\n".join(str(p) for p in self.problems))


class ConfigError(UserError):
    """One or more problems in a config file or a command line option."""


class RewardInputError(UserError):
    """A reward input file (``grpo rewards score --input``) or its output that cannot be used."""


class ServiceError(Exception):
    """A service the run depends on failed while it ran (a generation server stopped answering); one line."""
