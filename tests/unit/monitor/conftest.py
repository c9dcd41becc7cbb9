"""Fixtures: a hook path, a fake wall clock, and Monitor instances that are always closed."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vgpu.monitor.core import Monitor
from vgpu.monitor.daemon import open_nvml
from vgpu.monitor.pods import PodIndex
from vgpu.sim.nvml import fakenvml
from vgpu.sim.pods import StaticPods


class FakeWallClock:
    """Unix time that moves only when told to."""

    def __init__(self, t: float | None = None):
        self.t = float(time.time() if t is None else t)

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def hook(tmp_path: pathlib.Path) -> pathlib.Path:
    h = tmp_path / "vgpu"
    h.mkdir()
    return h


@pytest.fixture
def clock() -> FakeWallClock:
    return FakeWallClock()


@pytest.fixture
def make_monitor(hook: pathlib.Path, clock: FakeWallClock) -> Iterator[Callable[..., Monitor]]:
    made: list[Any] = []

    def make(pods: PodIndex | None = None, *, host: Any = None, **kw: Any) -> Monitor:
        kw.setdefault("clock", clock)
        kw.setdefault("use_inotify", False)
        m = Monitor(str(hook), pods if pods is not None else StaticPods([]), host, "node-1", **kw)
        made.append(m)
        return m

    yield make
    for m in reversed(made):
        m.close()


@pytest.fixture
def nvml_two_gpus(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> fakenvml.FakeNvml:
    """A fake NVML with two A100s (the second one's UUID matches helpers.UUIDS[1])."""
    from .helpers import UUIDS

    fake = fakenvml.FakeNvml.create(
        tmp_path / "nvml",
        [
            fakenvml.device(0, uuid=UUIDS[0], memory_used_mib=1234, utilization_gpu=37, utilization_memory=11),
            fakenvml.device(1, uuid=UUIDS[1], memory_used_mib=4321, utilization_gpu=73, utilization_memory=22),
        ],
    )
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    return fake


@pytest.fixture
def host_source(nvml_two_gpus: fakenvml.FakeNvml) -> Iterator[Any]:
    src = open_nvml(str(nvml_two_gpus.library), 1.0)[0]
    assert src is not None
    yield src
    src.stop()
