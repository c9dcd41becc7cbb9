"""What this node's pods were allocated, next to each GPU's capacity (docs/metrics.md §3.1).

The values come from the pods the monitor already watches (their ``vgpu-ids-new``, decoded once
per watch event into :class:`vgpu.monitor.pods.PodInfo`), never from a region file: a region says
what a container uses, the scheduler's assignment says what it was given.  The capacities are what
the plugin registers for each GPU: NVML's memory rounded down to whole ``gpuMemoryFactor`` units,
``100 × deviceCoreScaling`` cores and ``deviceSplitCount`` shares, from ``--device-config``.

A scrape walks the pod index once: O(#pods + #GPUs), no API call; each pod's lines are rendered
once per watch event (the index replaces its ``PodInfo`` object) and reused by later scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.registry import Collector

from vgpu.monitor import families as F
from vgpu.monitor.exposition import RenderedFamily, label_text
from vgpu.monitor.host import HostGpu
from vgpu.monitor.pods import PodInfo, PodLookup

MIB = 1 << 20
_Z = f",{F.ZONE}}} "


@dataclass(frozen=True)
class Capacity:
    """Per-GPU limits shared by every GPU of the node (the device config's)."""

    memory_factor: int = 1
    cores: int = 100
    shares: int = 10


_CACHE_CAP = 4096  # pods whose rendered rows are kept (a node runs far fewer)


@dataclass(frozen=True, slots=True)
class _PodRows:
    """One pod's allocation: per GPU (MiB, cores, container devices) and its rendered lines."""

    pod: PodInfo
    per_gpu: dict[str, tuple[int, int, int]]
    hami: list[tuple[str, str]]
    legacy: list[tuple[str, str]]


@dataclass(slots=True)
class _GpuTotals:
    memory_mib: int = 0
    cores: int = 0
    shared: int = 0


class AllocationCollector(Collector):
    """Per-GPU allocated/limit and per-container allocated families, HAMi's names (legacy and ``hami_*``)."""

    def __init__(
        self,
        pods: PodLookup,
        gpus: Sequence[HostGpu],
        node_name: str,
        capacity: Capacity,
        *,
        legacy: bool = True,
        hami: bool = True,
    ):
        self.pods = pods
        self.node = node_name
        self.capacity = capacity
        self.legacy = legacy
        self.hami = hami
        self._cache: dict[str, _PodRows] = {}  # pod UID -> rows of the PodInfo object last seen
        self.gpus: tuple[HostGpu, ...] = ()
        self._gpu_labels: dict[str, tuple[str, str]] = {}
        self.set_gpus(gpus)

    def set_gpus(self, gpus: Sequence[HostGpu]) -> None:
        """The node's GPUs (at startup, or when NVML starts late): their per-GPU label text, once."""
        labels = {
            g.uuid: tuple(
                label_text(zip(names, (self.node, g.uuid, str(g.index), g.device_type), strict=True))
                for names in (F.HAMI_GPU_CORE_LIMIT.labels, F.LEGACY_GPU_CORE_LIMIT.labels)
            )
            for g in gpus
        }
        self._gpu_labels = {**self._gpu_labels, **labels}  # type: ignore[dict-item]
        self.gpus = tuple(gpus)  # after the labels: a concurrent scrape finds every label it needs

    def _pod_rows(self, pod: PodInfo) -> _PodRows:
        """What one pod contributes, rendered once per pod object (a watch event makes a new one)."""
        cached = self._cache.get(pod.uid)
        if cached is not None and cached.pod is pod:
            return cached
        factor = self.capacity.memory_factor
        per_ctr: dict[tuple[str, ...], list[int]] = {}
        per_gpu: dict[str, list[int]] = {}
        for container, devices in pod.devices.items():
            index = str(pod.container_index.get(container, ""))
            for d in devices:
                mib = d.usedmem * factor
                g = per_gpu.setdefault(d.uuid, [0, 0, 0])
                g[0] += mib
                g[1] += d.usedcores
                g[2] += 1
                row = per_ctr.setdefault((pod.namespace, self.node, pod.name, index, d.uuid, container), [0, 0])
                row[0] += mib * MIB
                row[1] += d.usedcores
        hami: list[tuple[str, str]] = []
        legacy: list[tuple[str, str]] = []
        for values, (mem, cores) in sorted(per_ctr.items()):
            ham = label_text(zip(F.HAMI_VGPU_MEMORY_ALLOCATED.labels, values, strict=True))
            leg = label_text(zip(F.LEGACY_VGPU_MEMORY_ALLOCATED.labels, values, strict=True))
            hami.append(
                (
                    f"hami_vgpu_memory_allocated_bytes{{{ham}{_Z}{mem}\n",
                    f"hami_vgpu_core_allocated_ratio{{{ham}{_Z}{cores}\n",
                )
            )
            legacy.append((f"vGPUMemoryAllocated{{{leg}{_Z}{mem}\n", f"vGPUCoreAllocated{{{leg}{_Z}{cores}\n"))
        rows = _PodRows(pod, {u: (m, c, n) for u, (m, c, n) in per_gpu.items()}, hami, legacy)
        if len(self._cache) >= _CACHE_CAP:
            self._cache.clear()
        self._cache[pod.uid] = rows
        return rows

    def totals(self, gpus: Sequence[HostGpu] | None = None) -> tuple[dict[str, _GpuTotals], list[_PodRows]]:
        """(per GPU UUID totals, the rows of every pod that counts); ``gpus`` defaults to the node's."""
        gpus = self.gpus if gpus is None else gpus
        per_gpu = {g.uuid: _GpuTotals() for g in gpus}
        pods = [self._pod_rows(p) for p in self.pods.pods() if p.allocates]
        for rows in pods:
            for uuid, (mib, cores, shared) in rows.per_gpu.items():
                t = per_gpu.get(uuid)
                if t is None:
                    t = per_gpu[uuid] = _GpuTotals()  # a GPU NVML did not list: still counted
                t.memory_mib += mib
                t.cores += cores
                t.shared += shared
        return per_gpu, pods

    def collect(self) -> Iterator[RenderedFamily]:
        if not (self.legacy or self.hami):
            return
        gpus = self.gpus
        per_gpu, pods = self.totals(gpus)
        cap = self.capacity
        h = {f.name: RenderedFamily(f.name, f.help, f.type) for f in F.HAMI_ALLOCATION}
        lg = {f.name: RenderedFamily(f.name, f.help, f.type) for f in F.LEGACY_ALLOCATION}
        for g in gpus:
            t = per_gpu[g.uuid]
            ham, leg = self._gpu_labels[g.uuid]
            limit = (g.memory_total_mib // cap.memory_factor) * cap.memory_factor * MIB
            used = t.memory_mib * MIB
            self._line(h, F.HAMI_GPU_MEMORY_LIMIT, ham, limit)
            self._line(h, F.HAMI_GPU_CORE_LIMIT, ham, cap.cores)
            self._line(h, F.HAMI_GPU_MEMORY_ALLOCATED, f'{ham},device_cores="{cap.cores}"', used)
            self._line(h, F.HAMI_GPU_CORE_ALLOCATED, ham, t.cores)
            self._line(h, F.HAMI_GPU_SHARED_COUNT, ham, t.shared)
            self._line(h, F.VGPU_GPU_SHARED_LIMIT, ham, cap.shares)
            self._line(lg, F.LEGACY_GPU_MEMORY_LIMIT, leg, limit)
            self._line(lg, F.LEGACY_GPU_CORE_LIMIT, leg, cap.cores)
            self._line(lg, F.LEGACY_GPU_MEMORY_ALLOCATED, f'{leg},devicecores="{cap.cores}"', used)
            self._line(lg, F.LEGACY_GPU_CORE_ALLOCATED, leg, t.cores)
            self._line(lg, F.LEGACY_GPU_SHARED_NUM, leg, t.shared)
        h_mem, h_core = h[F.HAMI_VGPU_MEMORY_ALLOCATED.name].lines, h[F.HAMI_VGPU_CORE_ALLOCATED.name].lines
        l_mem, l_core = lg[F.LEGACY_VGPU_MEMORY_ALLOCATED.name].lines, lg[F.LEGACY_VGPU_CORE_ALLOCATED.name].lines
        for rows in pods:
            for mem_line, core_line in rows.hami:
                h_mem.append(mem_line)
                h_core.append(core_line)
            for mem_line, core_line in rows.legacy:
                l_mem.append(mem_line)
                l_core.append(core_line)
        if self.hami:
            yield from h.values()
        if self.legacy:
            yield from lg.values()

    @staticmethod
    def _line(out: dict[str, RenderedFamily], family: F.Family, labels: str, value: int) -> None:
        out[family.name].lines.append(f"{family.name}{{{labels}{_Z}{value}\n")
