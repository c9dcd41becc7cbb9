"""Where the tests find the real external programs they drive.

``make helm`` (a dependency of ``make test``) installs kubectl under build/helm, so a fresh clone
has one even where the machine has none.  The chart tests render with that pinned one first; the
tests that drive kubectl as a user would take the one on PATH first (what the user runs).  A missing program
skips on a developer's machine and fails under CI (tests/conftest.py ``missing_program``).
"""

from __future__ import annotations

import pathlib
import shutil

from tests.conftest import missing_program

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILT_KUBECTL = REPO / "build" / "helm" / "kubectl"


def kubectl_path(*, prefer_built: bool = False) -> str | None:
    """kubectl on PATH or build/helm/kubectl (``prefer_built``: that one first), else None."""
    built = str(BUILT_KUBECTL) if BUILT_KUBECTL.is_file() else None
    on_path = shutil.which("kubectl")
    return (built or on_path) if prefer_built else (on_path or built)


def kubectl(why: str, *, prefer_built: bool = False) -> str:
    """The kubectl to run, or skip (fail under CI) saying ``why`` the test needs it."""
    path = kubectl_path(prefer_built=prefer_built)
    if path is None:
        missing_program(f"kubectl is not installed ({why}; `make helm` installs one under build/helm)")
    return path
