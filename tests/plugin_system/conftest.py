"""Fixtures that install throw-away plugin distributions for real entry-point discovery.

A fake distribution is a ``NAME-VERSION.dist-info`` folder with ``METADATA`` and
``entry_points.txt`` next to its module, on ``sys.path``: ``importlib.metadata``
finds it exactly as it finds a pip-installed package.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``install_plugin(dist, version, module_name, source, ep_name=None)`` makes a plugin discoverable."""
    monkeypatch.syspath_prepend(str(tmp_path))
    created: list[str] = []

    def install(dist: str, version: str, module: str, source: str, ep_name: str | None = None) -> None:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        info = tmp_path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[grpo]\n{ep_name or module} = {module}\n")
        created.append(module)
        importlib.invalidate_caches()

    yield install
    for module in created:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()
