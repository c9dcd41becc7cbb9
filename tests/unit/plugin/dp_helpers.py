"""Synthetic GPUs and configs for plugin unit tests (imported as a plain module)."""

from __future__ import annotations

from vgpu.config.model import DeviceConfig, EffectiveConfig, FilterDevices, NodeConfig
from vgpu.nvml.device import GpuInfo


def make_gpu(minor: int, mib: int = 81920, name: str = "NVIDIA A100-SXM4-80GB", index: int | None = None) -> GpuInfo:
    return GpuInfo(
        index=minor if index is None else index,
        uuid=f"GPU-{minor:08x}-6888-5063-1e4d-f2a09cfbf{minor:03x}",
        name=name,
        memory_total_mib=mib,
        minor=minor,
        pci_bus_id=f"00000000:{7 + minor:02X}:00.0",
        numa_node=0,
        compute_capability=(8, 0),
        mig_capable=True,
        mig_mode=False,
    )


def make_cfg(
    *,
    split: int = 10,
    factor: int = 1,
    core_scaling: float = 1.0,
    node_split: int | None = None,
    filter_uuids: frozenset[str] = frozenset(),
    **device: object,
) -> EffectiveConfig:
    return EffectiveConfig(
        DeviceConfig(device_split_count=split, gpu_memory_factor=factor, device_core_scaling=core_scaling, **device),  # type: ignore[arg-type]
        NodeConfig(name="n1", device_split_count=node_split, filter_devices=FilterDevices(uuids=filter_uuids)),
    )
