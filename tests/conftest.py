"""Fixtures shared by every test area.

Area-specific fixtures live in a conftest.py next to the tests that use them.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import NoReturn

import pytest

from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import subprocess_env  # noqa: F401 - imported from here by many tests


@pytest.fixture
def fake_nvml(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[fakenvml.FakeNvml]:
    """A fake NVML with one A100-SXM4-80GB; its env is set in this process too.

    Tests change ``fake_nvml.config`` and call ``fake_nvml.write()`` (or the helpers)
    to change what NVML reports, also to processes started with ``fake_nvml.env``.
    """
    fake = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0)])
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    yield fake


def missing_program(reason: str) -> NoReturn:
    """Skip a test whose external program is absent; under CI (where .ci/run installs it) fail instead.

    The testing conventions (docs/testing.md §2): a skip is acceptable only on a machine that cannot install the
    program; in CI a missing program is a set-up failure, never a silent skip.
    """
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def unavailable_here(condition: bool, reason: str) -> pytest.MarkDecorator:
    """Skip where the machine lacks what the test needs (root, inotify); under CI, which has it, run
    and fail instead (docs/testing.md §2: a skip never hides a set-up failure in CI)."""
    return pytest.mark.skipif(
        condition and not os.environ.get("CI"),
        reason=f"{reason} (skipped off CI only: with CI set the test runs, so a CI machine lacking it fails)",
    )
