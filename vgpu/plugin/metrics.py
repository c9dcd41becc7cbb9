"""The plugin's ``/metrics``: its families, the counters its hot paths bump, the scrape-time collector.

docs/metrics.md §10.  Every family is named here once (:data:`FAMILIES`).  The hot paths only
count: an Allocate adds one to a counter and one to a histogram bucket under a lock
(:class:`MeteredAllocator`), an API request one to a counter (``KubeClient.observe``).  Everything
else — devices per resource and health, registration, NVML, GPU health — is read from the
daemon's state when Prometheus scrapes (:class:`PluginCollector`), so nothing is kept twice.

Every labelled counter is present at zero from the start for its known label values: each
resource × result × reason of the Allocate counter, each write verb × result.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from vgpu import buildinfo
from vgpu.plugin.api import pb
from vgpu.plugin.responses import FAILURE_REASONS, REASON_INTERNAL, AllocationError

if TYPE_CHECKING:
    from vgpu.plugin.health_metrics import HealthMetrics
    from vgpu.plugin.resources import ResourceManager
    from vgpu.plugin.responses import Allocator


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    type: str
    labels: tuple[str, ...] = ()


ALLOCATIONS = Family(
    "vgpu_plugin_allocations_total",
    "Allocate calls answered, by resource, result (success|failure) and reason",
    "counter",
    ("resource", "result", "reason"),
)
ALLOCATE_DURATION = Family(
    "vgpu_plugin_allocate_duration_seconds", "Time to answer one Allocate call", "histogram", ("resource",)
)
DEVICES = Family(
    "vgpu_plugin_devices",
    "Devices advertised to the kubelet, by resource and health (healthy|unhealthy)",
    "gauge",
    ("resource", "health"),
)
REGISTERED = Family(
    "vgpu_plugin_registered", "1 while the resource is registered with the kubelet", "gauge", ("resource",)
)
KUBELET_RESTARTS = Family(
    "vgpu_plugin_kubelet_restarts_total",
    "Re-registrations forced by the kubelet (its socket gone or re-created, or our sockets deleted)",
    "counter",
)
API_WRITES = Family(
    "vgpu_plugin_api_writes_total",
    "Write requests to the API server, by verb and result",
    "counter",
    ("verb", "result"),
)
NVML_UP = Family("vgpu_plugin_nvml_up", "1 when NVML is initialised and its event wait is not failing", "gauge")
GPU_HEALTHY = Family(
    "vgpu_gpu_healthy", "1 when the GPU is healthy, 0 when marked unhealthy", "gauge", ("uuid", "index")
)
GPU_XID_EVENTS = Family(
    "vgpu_gpu_xid_events_total",
    "NVML XID critical-error events seen, by GPU and XID code (ignored XIDs included)",
    "counter",
    ("uuid", "index", "xid"),
)
GPU_HEALTH_CHANGED = Family(
    "vgpu_gpu_health_changed_timestamp_seconds",
    "Unix time of the GPU's last health change (the plugin's start until the first change)",
    "gauge",
    ("uuid", "index"),
)
CDI_UNRESOLVED = Family(
    "vgpu_plugin_cdi_unresolved_devices",
    "Devices the plugin would hand out that no visible CDI spec names",
    "gauge",
)
BUILD_INFO = Family(buildinfo.NAME, buildinfo.HELP, "gauge", buildinfo.LABELS)

FAMILIES = (
    ALLOCATIONS,
    ALLOCATE_DURATION,
    DEVICES,
    REGISTERED,
    KUBELET_RESTARTS,
    API_WRITES,
    NVML_UP,
    GPU_HEALTHY,
    GPU_XID_EVENTS,
    GPU_HEALTH_CHANGED,
    CDI_UNRESOLVED,
    BUILD_INFO,
)

SUCCESS = "success"
FAILURE = "failure"
SERVED = "served"  # a primary call: env, mounts or devices handed out
EMPTY = "empty"  # an empty answer: vgpu-cores, a non-primary resource, an unmatched vgpu-memory call
SUCCESS_REASONS = (SERVED, EMPTY)
WRITE_VERBS = ("create", "patch")  # what the plugin writes (docs/configuration.md §6: its ClusterRole)
ALLOCATE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class PluginState(Protocol):
    """What the collector reads from the daemon at scrape time."""

    def resource_managers(self) -> Sequence[ResourceManager]: ...

    def registered_resources(self) -> frozenset[str]: ...

    def kubelet_restarts(self) -> int: ...

    def nvml_up(self) -> bool: ...


@dataclass
class _Histogram:
    buckets: list[int]
    count: int = 0
    total: float = 0.0


class PluginMetrics:
    """The counters (thread-safe, one lock, no I/O) and the daemon-state gauges added with :meth:`add_gauge`."""

    def __init__(self, resources: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._allocations: dict[tuple[str, str, str], int] = {}
        self._durations: dict[str, _Histogram] = {}
        self._writes: dict[tuple[str, str], int] = {(v, r): 0 for v in WRITE_VERBS for r in (SUCCESS, FAILURE)}
        self._gauges: list[tuple[Family, Callable[[], float | None]]] = []
        for r in resources:
            self.add_resource(r)

    def add_resource(self, resource: str) -> None:
        """Make every (result, reason) series of ``resource`` exist at zero."""
        with self._lock:
            self._add_resource(resource)

    def _add_resource(self, resource: str) -> None:
        if resource in self._durations:
            return
        self._durations[resource] = _Histogram([0] * len(ALLOCATE_BUCKETS))
        for reason in SUCCESS_REASONS:
            self._allocations[(resource, SUCCESS, reason)] = 0
        for reason in FAILURE_REASONS:
            self._allocations[(resource, FAILURE, reason)] = 0

    def allocation(self, resource: str, reason: str | None, seconds: float) -> None:
        """One answered Allocate: ``reason`` None = served, else a success or failure reason."""
        result = FAILURE if reason in FAILURE_REASONS else SUCCESS
        key = (resource, result, reason or SERVED)
        slot = bisect.bisect_left(ALLOCATE_BUCKETS, seconds)
        with self._lock:
            self._add_resource(resource)
            self._allocations[key] = self._allocations.get(key, 0) + 1
            h = self._durations[resource]
            if slot < len(h.buckets):
                h.buckets[slot] += 1
            h.count += 1
            h.total += seconds

    def api_call(self, verb: str, ok: bool) -> None:
        """``KubeClient.observe``: writes are counted, reads are not."""
        if verb not in WRITE_VERBS:
            return
        key = (verb, SUCCESS if ok else FAILURE)
        with self._lock:
            self._writes[key] += 1

    def add_gauge(self, family: Family, value: Callable[[], float | None]) -> None:
        """An unlabelled gauge read from daemon state at scrape time (None: omitted this scrape).

        E.g. ``metrics.add_gauge(CDI_UNRESOLVED, lambda: cdi.unresolved_count())``.
        """
        with self._lock:
            self._gauges.append((family, value))

    # -- scrape --------------------------------------------------------------------

    def counter_families(self) -> list[Metric]:
        with self._lock:
            allocations = sorted(self._allocations.items())
            durations = {r: (list(h.buckets), h.count, h.total) for r, h in sorted(self._durations.items())}
            writes = sorted(self._writes.items())
            gauges = list(self._gauges)
        out: list[Metric] = []
        fam = CounterMetricFamily(ALLOCATIONS.name, ALLOCATIONS.help, labels=ALLOCATIONS.labels)
        for labels, n in allocations:
            fam.add_metric(labels, n)
        out.append(fam)
        hist = HistogramMetricFamily(ALLOCATE_DURATION.name, ALLOCATE_DURATION.help, labels=ALLOCATE_DURATION.labels)
        for resource, (buckets, count, total) in durations.items():
            cumulative, rows = 0, []
            for bound, n in zip(ALLOCATE_BUCKETS, buckets, strict=True):
                cumulative += n
                rows.append((repr(bound), cumulative))
            rows.append(("+Inf", count))
            hist.add_metric([resource], rows, total)
        out.append(hist)
        fam = CounterMetricFamily(API_WRITES.name, API_WRITES.help, labels=API_WRITES.labels)
        for verb_result, n in writes:
            fam.add_metric(verb_result, n)
        out.append(fam)
        for family, value in gauges:
            v = value()
            if v is not None:
                g = GaugeMetricFamily(family.name, family.help)
                g.add_metric([], v)
                out.append(g)
        return out


class MeteredAllocator:
    """An :class:`~vgpu.plugin.responses.Allocator` that counts and times every Allocate of ``inner``."""

    def __init__(self, inner: Allocator, metrics: PluginMetrics, clock: Callable[[], float] = time.perf_counter):
        self.inner = inner
        self.metrics = metrics
        self.clock = clock

    def allocate(self, resource: ResourceManager, request: pb.AllocateRequest) -> pb.AllocateResponse:
        start = self.clock()
        try:
            resp = self.inner.allocate(resource, request)
        except AllocationError as exc:
            self.metrics.allocation(resource.resource_name, exc.reason, self.clock() - start)
            raise
        except Exception:
            self.metrics.allocation(resource.resource_name, REASON_INTERNAL, self.clock() - start)
            raise
        served = any(c.envs or c.mounts or c.devices for c in resp.container_responses)
        self.metrics.allocation(resource.resource_name, None if served else EMPTY, self.clock() - start)
        return resp

    def preferred_allocation(
        self, resource: ResourceManager, request: pb.PreferredAllocationRequest
    ) -> pb.PreferredAllocationResponse:
        return self.inner.preferred_allocation(resource, request)


class PluginCollector(Collector):
    """Every plugin family, computed when scraped."""

    def __init__(
        self,
        metrics: PluginMetrics,
        state: PluginState,
        health: HealthMetrics,
        build_labels: Callable[[], tuple[tuple[str, str], ...]],
    ):
        self.metrics = metrics
        self.state = state
        self.health = health
        self.build_labels = build_labels

    def collect(self) -> Iterator[Metric]:
        s = self.state
        managers = list(s.resource_managers())
        registered = s.registered_resources()
        devices = GaugeMetricFamily(DEVICES.name, DEVICES.help, labels=DEVICES.labels)
        reg = GaugeMetricFamily(REGISTERED.name, REGISTERED.help, labels=REGISTERED.labels)
        for m in managers:
            healthy, unhealthy = m.health_counts()
            devices.add_metric([m.resource_name, "healthy"], healthy)
            devices.add_metric([m.resource_name, "unhealthy"], unhealthy)
            reg.add_metric([m.resource_name], 1 if m.resource_name in registered else 0)
        yield from self.metrics.counter_families()
        yield devices
        yield reg
        restarts = CounterMetricFamily(KUBELET_RESTARTS.name, KUBELET_RESTARTS.help)
        restarts.add_metric([], s.kubelet_restarts())
        yield restarts
        up = GaugeMetricFamily(NVML_UP.name, NVML_UP.help)
        up.add_metric([], 1 if s.nvml_up() else 0)
        yield up
        yield from self.health.families()
        labels = self.build_labels()
        info = GaugeMetricFamily(BUILD_INFO.name, BUILD_INFO.help, labels=[k for k, _ in labels])
        info.add_metric([v for _, v in labels], 1)
        yield info


def registry_of(collector: PluginCollector) -> Callable[[], bytes]:
    """The ``/metrics`` body renderer of ``collector`` (a private registry: no process collectors)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return lambda: generate_latest(registry)
