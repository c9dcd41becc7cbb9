"""Startup check that no ListAndWatch message can exceed the kubelet's 4 MiB limit.

docs/decisions.md decision 3 / docs/kubelet-api.md §7.2: the kubelet drops a stream whose message is
larger than 4,194,304 bytes, and the resource then silently shows 0 (plugin#99:
``23264648 vs. 4194304``).  We refuse to start instead, naming the smallest
``gpuMemoryFactor`` that fits.  Sizes are computed exactly from the IDs that would be
advertised, all assumed ``Unhealthy`` (the worst case, 2 bytes more per entry).
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.config.model import EffectiveConfig
from vgpu.nvml.device import GpuInfo
from vgpu.plugin.api import KUBELET_MAX_RECEIVE_BYTES
from vgpu.plugin.devices import ALL_KINDS, ResourceKind, id_blocks
from vgpu.plugin.listwatch import message_size


class SizeCheckError(Exception):
    """A resource's worst-case ListAndWatch message would not fit; exit status 1."""


@dataclass(frozen=True)
class SizeReport:
    kind: ResourceKind
    worst_case_bytes: int


def worst_case_size(kind: ResourceKind, gpus: list[GpuInfo], cfg: EffectiveConfig, *, factor: int | None = None) -> int:
    return message_size(id_blocks(kind, gpus, cfg, factor=factor), healthy=False)


def minimum_memory_factor(
    gpus: list[GpuInfo], cfg: EffectiveConfig, limit: int = KUBELET_MAX_RECEIVE_BYTES
) -> int | None:
    """Smallest integer f ≥ 1 whose all-Unhealthy vgpu-memory message fits in ``limit``.

    The size is non-increasing in f (fewer IDs, shorter digits), so a binary search over
    [1, max MiB] is exact.  None when even one ID per GPU does not fit.
    """

    def fits(f: int) -> bool:
        return worst_case_size(ResourceKind.MEMORY, gpus, cfg, factor=f) <= limit

    hi = max((g.memory_total_mib for g in gpus), default=1) or 1
    if not fits(hi):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def check_listandwatch_sizes(
    gpus: list[GpuInfo], cfg: EffectiveConfig, limit: int = KUBELET_MAX_RECEIVE_BYTES
) -> list[SizeReport]:
    """Raise SizeCheckError when a resource would overflow; otherwise return the sizes."""
    reports = [SizeReport(k, worst_case_size(k, gpus, cfg)) for k in ALL_KINDS]
    for r in reports:
        if r.worst_case_bytes <= limit:
            continue
        if r.kind is ResourceKind.MEMORY:
            f = minimum_memory_factor(gpus, cfg, limit)
            advice = (
                f"set gpuMemoryFactor to at least {f}"
                if f is not None
                else "no gpuMemoryFactor makes it fit; advertise fewer GPUs (filterdevices)"
            )
            raise SizeCheckError(
                f"vgpu-memory ListAndWatch would be {r.worst_case_bytes} bytes (limit {limit}); {advice}"
            )
        value = cfg.split_count if r.kind is ResourceKind.NUMBER else cfg.core_scaling
        raise SizeCheckError(
            f"vgpu-{r.kind.value} ListAndWatch would be {r.worst_case_bytes} bytes (limit {limit}); "
            f"{r.kind.count_key} {value} is too large for {len(gpus)} GPU(s)"
        )
    return reports
