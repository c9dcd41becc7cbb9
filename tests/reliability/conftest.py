"""Fixtures of the reliability suite: the Volcano end-to-end cluster plus fault-aware checks.

The cluster (simulated API server, REAL ``vgpu plugin`` process, fake kubelet, fake NVML,
scheduler emulator) is the one of tests/integration/volcano; this file adds the invariants
every fault test asserts (:mod:`tests.reliability.invariants`) and the ``soak`` selection rule:
tests marked ``soak`` (the long variants) run only when ``-m`` names the marker (``make soak``).
"""
from __future__ import annotations

import pytest

from tests.integration.volcano.conftest import (  # noqa: F401 - fixtures re-exported for this suite
    apiserver,
    cluster,
    cluster_factory,
    hook_path,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip) the long soak variants unless the run asked for them with ``-m soak``."""
    if "soak" in (config.option.markexpr or ""):
        return
    long_runs = [i for i in items if i.get_closest_marker("soak") is not None]
    if long_runs:
        config.hook.pytest_deselected(items=long_runs)
        items[:] = [i for i in items if i.get_closest_marker("soak") is None]
