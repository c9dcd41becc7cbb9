"""Fixtures for plugin unit tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture
def socket_dir() -> Iterator[str]:
    """A short directory for unix sockets (pytest's tmp_path can exceed the 107-byte limit)."""
    d = tempfile.mkdtemp(prefix="vgpu-dp-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)
