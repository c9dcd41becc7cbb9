"""Fixtures every integration package shares: one simulated API server per test.

Packages that need a differently seeded server (tests/integration/volcano) define their own
``apiserver`` fixture, which overrides this one there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vgpu.sim.apiserver import ApiServer


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    """The simulated API server over real HTTP, with bookmarks every 0.2 s (watch resumption)."""
    server = ApiServer(bookmark_interval=0.2).start()
    try:
        yield server
    finally:
        server.stop()
