"""The three vGPU resources and the fake device IDs each one advertises.

docs/kubelet-api.md §4: every resource lists the same (non-filtered)
GPUs; each GPU contributes a block of fake IDs that starts with a per-GPU prefix, so the
health code can flip all of one GPU's devices at once and the IDs stay stable across
plugin restarts (the kubelet checkpoints allocated IDs).

- vgpu-number: ``<UUID>-<i>``, i < deviceSplitCount
- vgpu-memory: ``<minor>-<i>``, i < floor(MiB / gpuMemoryFactor)   (compact, our choice)
- vgpu-cores:  ``<UUID>-core-<i>``, i < int(100 × deviceCoreScaling)

vgpu-number and vgpu-cores IDs carry their GPU's NUMA node as ListAndWatch ``topology`` (none
when neither NVML nor sysfs knows it), so the kubelet's Topology Manager can align CPUs and GPUs;
vgpu-memory IDs carry none, which keeps its 4 MiB budget (docs/kubelet-api.md §7.4).
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.config.model import EffectiveConfig
from vgpu.nvml.device import GpuInfo
from vgpu.protocol.pod_model import ResourceKind  # the pod model's; the plugin serves one per kind

ALL_KINDS = (ResourceKind.NUMBER, ResourceKind.MEMORY, ResourceKind.CORES)


@dataclass(frozen=True)
class ResourceSpec:
    """What the kubelet is told about one resource: its name, socket and options."""

    kind: ResourceKind
    resource_name: str

    @property
    def socket_name(self) -> str:
        return self.kind.socket_name

    @property
    def preferred_allocation(self) -> bool:
        """Only vgpu-number advertises GetPreferredAllocation (docs/kubelet-api.md §4)."""
        return self.kind is ResourceKind.NUMBER


def resource_specs(cfg: EffectiveConfig) -> tuple[ResourceSpec, ...]:
    """The three resources in registration order, names from the device config."""
    d = cfg.device
    return (
        ResourceSpec(ResourceKind.NUMBER, d.resource_count_name),
        ResourceSpec(ResourceKind.MEMORY, d.resource_memory_name),
        ResourceSpec(ResourceKind.CORES, d.resource_core_name),
    )


@dataclass(frozen=True)
class IdBlock:
    """The fake IDs of one GPU in one resource: ``prefix + str(i)`` for i < count, on ``numa_node``."""

    gpu_uuid: str
    prefix: str
    count: int
    numa_node: int | None = None

    def ids(self) -> list[str]:
        p = self.prefix
        return [f"{p}{i}" for i in range(self.count)]


def parse_index(device_id: str, prefix: str) -> int | None:
    """``i`` of ``prefix + str(i)``, or None when the ID is not of that form."""
    if not device_id.startswith(prefix):
        return None
    digits = device_id[len(prefix) :]
    if not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
        return None
    return int(digits)


def memory_units(gpu: GpuInfo, factor: int) -> int:
    """vgpu-memory IDs of one GPU, also the register annotation's Devmem: floor(MiB / f)."""
    return gpu.memory_total_mib // factor


def id_block(kind: ResourceKind, gpu: GpuInfo, cfg: EffectiveConfig, *, factor: int | None = None) -> IdBlock:
    """The ID block of ``gpu`` for ``kind``; ``factor`` overrides gpuMemoryFactor (size check)."""
    if kind is ResourceKind.NUMBER:
        return IdBlock(gpu.uuid, f"{gpu.uuid}-", cfg.split_count, gpu.numa_node)
    if kind is ResourceKind.MEMORY:
        return IdBlock(gpu.uuid, f"{gpu.minor}-", memory_units(gpu, factor or cfg.gpu_memory_factor))
    return IdBlock(gpu.uuid, f"{gpu.uuid}-core-", cfg.cores_per_gpu, gpu.numa_node)


def id_blocks(
    kind: ResourceKind, gpus: list[GpuInfo], cfg: EffectiveConfig, *, factor: int | None = None
) -> list[IdBlock]:
    return [id_block(kind, g, cfg, factor=factor) for g in gpus]
