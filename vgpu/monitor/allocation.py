"""What this node's pods were allocated, next to each GPU's capacity (docs/metrics.md §3.1).

The values come from the pods the monitor already watches (their ``vgpu-ids-new``, decoded once
per watch event into :class:`vgpu.monitor.pods.PodInfo`), never from a region file: a region says
what a container uses, the scheduler's assignment says what it was given.  The capacities are what
the plugin registers for each GPU: NVML's memory rounded down to whole ``gpuMemoryFactor`` units,
``100 × deviceCoreScaling`` cores and ``deviceSplitCount`` shares, from ``--device-config``.

A scrape walks the pod index once: O(#pods + #GPUs), no API call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.registry import Collector

from vgpu.monitor import families as F
from vgpu.monitor.exposition import RenderedFamily, label_text
from vgpu.monitor.host import HostGpu
from vgpu.monitor.pods import PodLookup

MIB = 1 << 20
_Z = f",{F.ZONE}}} "


@dataclass(frozen=True)
class Capacity:
    """Per-GPU limits shared by every GPU of the node (the device config's)."""

    memory_factor: int = 1
    cores: int = 100
    shares: int = 10


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
        self.gpus = tuple(gpus)
        self.node = node_name
        self.capacity = capacity
        self.legacy = legacy
        self.hami = hami
        self._gpu_labels = {
            g.uuid: (
                label_text(
                    zip(F.HAMI_GPU_CORE_LIMIT.labels, (node_name, g.uuid, str(g.index), g.device_type), strict=True)
                ),
                label_text(
                    zip(F.LEGACY_GPU_CORE_LIMIT.labels, (node_name, g.uuid, str(g.index), g.device_type), strict=True)
                ),
            )
            for g in self.gpus
        }

    def totals(self) -> tuple[dict[str, _GpuTotals], list[tuple[tuple[str, ...], int, int]]]:
        """(per GPU UUID totals, per container and GPU (label values, memory bytes, cores)).

        A container holding two MIG slots of one GPU has one row for that GPU with their sum.
        """
        per_gpu = {g.uuid: _GpuTotals() for g in self.gpus}
        per_ctr: dict[tuple[str, ...], list[int]] = {}
        factor = self.capacity.memory_factor
        for pod in self.pods.pods():
            if not pod.allocates:
                continue
            for container, devices in pod.devices.items():
                index = str(pod.container_index.get(container, ""))
                for d in devices:
                    mib = d.usedmem * factor
                    t = per_gpu.get(d.uuid)
                    if t is None:
                        t = per_gpu[d.uuid] = _GpuTotals()  # a GPU NVML did not list: still counted
                    t.memory_mib += mib
                    t.cores += d.usedcores
                    t.shared += 1
                    row = per_ctr.setdefault((pod.namespace, pod.name, index, d.uuid, container), [0, 0])
                    row[0] += mib * MIB
                    row[1] += d.usedcores
        return per_gpu, sorted((key, mem, cores) for key, (mem, cores) in per_ctr.items())

    def collect(self) -> Iterator[RenderedFamily]:
        if not (self.legacy or self.hami):
            return
        per_gpu, rows = self.totals()
        cap = self.capacity
        h = {f.name: RenderedFamily(f.name, f.help, f.type) for f in F.HAMI_ALLOCATION}
        lg = {f.name: RenderedFamily(f.name, f.help, f.type) for f in F.LEGACY_ALLOCATION}
        for g in self.gpus:
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
        for (ns, pod, index, uuid, container), mem, cores in rows:
            values = (ns, self.node, pod, index, uuid, container)
            ham = label_text(zip(F.HAMI_VGPU_MEMORY_ALLOCATED.labels, values, strict=True))
            leg = label_text(zip(F.LEGACY_VGPU_MEMORY_ALLOCATED.labels, values, strict=True))
            self._line(h, F.HAMI_VGPU_MEMORY_ALLOCATED, ham, mem)
            self._line(h, F.HAMI_VGPU_CORE_ALLOCATED, ham, cores)
            self._line(lg, F.LEGACY_VGPU_MEMORY_ALLOCATED, leg, mem)
            self._line(lg, F.LEGACY_VGPU_CORE_ALLOCATED, leg, cores)
        if self.hami:
            yield from h.values()
        if self.legacy:
            yield from lg.values()

    @staticmethod
    def _line(out: dict[str, RenderedFamily], family: F.Family, labels: str, value: int) -> None:
        out[family.name].lines.append(f"{family.name}{{{labels}{_Z}{value}\n")
