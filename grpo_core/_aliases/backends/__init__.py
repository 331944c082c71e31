"""Deprecated: ``grpo_core.backends`` moved to :mod:`grpo_core.trainer_backends`.

A package of its own (not the new one under the old name), so that ``grpo_core.backends.trl_backend`` and
its sibling resolve to this folder's aliases and so to the modules they moved to, never to second copies.
"""

from grpo_core._aliases import warn

warn(__name__)
