"""Fixtures of the reliability suite: the Volcano end-to-end cluster plus fault-aware checks.

The cluster (simulated API server, REAL ``vgpu plugin`` process, fake kubelet, fake NVML,
scheduler emulator) is the one of tests/integration/volcano.  Two ways to get one:

- ``cluster``: the session's :class:`tests.reliability.shared.SharedCluster`, reset to (and
  checked in) its known starting state before each test — for tests whose fault is fully undone
  by the end of the test (or by the reset: pods, Events and API fault rules are removed);
- ``cluster_factory()`` / ``fresh_cluster``: a cluster of the test's own, for faults that cannot
  be undone (a lost GPU, a hung NVML call, another device config).

This file also holds the ``soak`` selection rule: tests marked ``soak`` (the long variants) run
only when ``-m`` names the marker (``make soak``).  The invariants every fault test asserts are
in :mod:`tests.reliability.invariants`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.volcano.conftest import (  # noqa: F401 - fixtures re-exported for this suite
    Cluster,
    apiserver,
    cluster_factory,
    hook_path,
)

from .shared import SharedCluster


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Remember each phase's report on the item, so the shared cluster knows a test failed."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedCluster]:
    shared = SharedCluster(tmp_path_factory.mktemp("shared-cluster"))
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def cluster(shared_cluster: SharedCluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The shared cluster in its known starting state; rebuilt for the next test if this one fails."""
    c = shared_cluster.checkout()
    first, log_from = c.plugin, len(c.plugin.log())
    yield c
    rep = getattr(request.node, "rep_call", None)
    if rep is None or rep.failed:
        shared_cluster.dirty = "the previous test failed"
    shown = [(first, log_from)] + ([(c.plugin, 0)] if c.plugin is not first else [])  # restarted by the test
    for plugin, start in shown:
        lines = [ln if len(ln) < 400 else ln[:400] + " …" for ln in plugin.log()[start:].splitlines()]
        print(f"--- shared plugin log during this test ({plugin.log_path}) ---\n" + "\n".join(lines[-80:]))


@pytest.fixture
def fresh_cluster(cluster_factory) -> Cluster:  # noqa: F811 - pytest injects the fixture re-exported above
    """A cluster of this test's own (its fault is not undone by the end of the test)."""
    return cluster_factory()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip) the long soak variants unless the run asked for them with ``-m soak``."""
    if "soak" in (config.option.markexpr or ""):
        return
    long_runs = [i for i in items if i.get_closest_marker("soak") is not None]
    if long_runs:
        config.hook.pytest_deselected(items=long_runs)
        items[:] = [i for i in items if i.get_closest_marker("soak") is None]
