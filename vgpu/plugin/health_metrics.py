"""GPU health metrics of the plugin (docs/metrics.md §10.3): XID events, health, last change.

The plugin's health loop (:class:`vgpu.nvml.health.HealthMonitor`) sees every XID event, so the
plugin exports them — the monitor does not.  The loop calls :meth:`HealthMetrics.xid` for each
XID on one of our GPUs (ignored ones too: an XID 13 is not a reason to withdraw a GPU but worth
seeing); the health board's listener stamps each change.  Health itself is read from the board
when scraped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from vgpu.nvml.device import GpuInfo
from vgpu.nvml.health import DEFAULT_IGNORED_XIDS, GpuHealth
from vgpu.plugin.metrics import GPU_HEALTH_CHANGED, GPU_HEALTHY, GPU_XID_EVENTS

PRESET_XIDS = tuple(sorted(DEFAULT_IGNORED_XIDS | {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}))
"""XID codes whose series exist at zero for every GPU from the start (docs/metrics.md §10.3); any
other code gets its series at its first event."""


class HealthMetrics:
    """Per-GPU XID counts and health-change times; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._index: dict[str, int] = {}
        self._xids: dict[tuple[str, int], int] = {}
        self._changed: dict[str, float] = {}
        self._health: GpuHealth | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def watch(self, health: GpuHealth, gpus: Sequence[GpuInfo]) -> None:
        """Follow ``health`` for ``gpus`` (again after a reload; counts and times are kept)."""
        with self._lock:
            if self._unsubscribe is not None and self._health is not health:
                self._unsubscribe()
                self._unsubscribe = None
            self._health = health
            now = self._clock()
            self._index = {g.uuid: g.index for g in gpus}
            for u in self._index:
                self._changed.setdefault(u, now)
                for x in PRESET_XIDS:
                    self._xids.setdefault((u, x), 0)
            subscribe = self._unsubscribe is None
        if subscribe:
            self._unsubscribe = health.subscribe(self._on_change)

    def xid(self, uuid: str, xid: int) -> None:
        """One XID event on GPU ``uuid`` (the health loop's ``on_xid``; never raises)."""
        with self._lock:
            self._xids[(uuid, xid)] = self._xids.get((uuid, xid), 0) + 1

    def _on_change(self, changed: dict[str, bool]) -> None:
        now = self._clock()
        with self._lock:
            for u in changed:
                self._changed[u] = now

    def families(self) -> Iterator[Metric]:
        with self._lock:
            index = dict(self._index)
            xids = sorted((k, n) for k, n in self._xids.items() if k[0] in index)
            changed = dict(self._changed)
            board = self._health
        state = board.snapshot() if board is not None else {}
        healthy = GaugeMetricFamily(GPU_HEALTHY.name, GPU_HEALTHY.help, labels=GPU_HEALTHY.labels)
        stamp = GaugeMetricFamily(GPU_HEALTH_CHANGED.name, GPU_HEALTH_CHANGED.help, labels=GPU_HEALTH_CHANGED.labels)
        for uuid, i in index.items():
            healthy.add_metric([uuid, str(i)], 1 if state.get(uuid, True) else 0)
            stamp.add_metric([uuid, str(i)], changed.get(uuid, 0.0))
        events = CounterMetricFamily(GPU_XID_EVENTS.name, GPU_XID_EVENTS.help, labels=GPU_XID_EVENTS.labels)
        for (uuid, x), n in xids:
            events.add_metric([uuid, str(index[uuid]), str(x)], n)
        yield healthy
        yield events
        yield stamp
