"""The one exception of the isolation layer: work that did not answer, and why."""

from __future__ import annotations


class WorkerFailed(Exception):
    """Isolated work did not answer: ``kind`` is ``timeout``, ``crash``, ``load`` (what the worker was to hold
    could not be loaded there, e.g. its module cannot be imported, or no worker could be started) or
    ``unsendable`` (a request does not pickle; nothing was sent)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message
