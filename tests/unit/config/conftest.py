"""Helpers for the config tests: write a config file the way a ConfigMap mount would."""

from __future__ import annotations

import pathlib
import textwrap
from collections.abc import Callable

import pytest


@pytest.fixture
def write_file(tmp_path: pathlib.Path) -> Callable[..., pathlib.Path]:
    """write_file(text, name="device-config.yaml") -> path; text is dedented."""

    def write(text: str | bytes, name: str = "device-config.yaml") -> pathlib.Path:
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write
