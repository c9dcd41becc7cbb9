"""What the rest of the system knows about one physical GPU."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuInfo:
    """A physical GPU as discovered through NVML (host NVML index order)."""

    index: int
    uuid: str
    name: str
    memory_total_mib: int
    minor: int
    pci_bus_id: str
    numa_node: int | None
    compute_capability: tuple[int, int]
    mig_capable: bool
    mig_mode: bool
    memory_supported: bool = True
    """False when nvmlDeviceGetMemoryInfo answers NOT_SUPPORTED (unified-memory parts such as GB10):
    ``memory_total_mib`` is then 0 and the plugin does not advertise the GPU (HAMi-core cannot limit
    memory NVML cannot measure; docs/kubelet-api.md §4.1)."""
