"""The node every Allocate benchmark serves: 8 fake A100s and a HAMi-core hook directory.

One definition, so the in-process, scaling, gRPC and 40,000-ID benchmarks measure the same node.
"""

from __future__ import annotations

import pathlib

from vgpu.nvml.device import GpuInfo


def hook_dir(tmp: pathlib.Path) -> pathlib.Path:
    """``tmp/hook`` with the two HAMi-core files Allocate checks before it answers."""
    hook = tmp / "hook"
    hook.mkdir()
    (hook / "libvgpu.so").write_bytes(b"x")
    (hook / "ld.so.preload").write_text("/usr/local/vgpu/libvgpu.so")
    return hook


def a100s(uuids: list[str], count: int = 8) -> list[GpuInfo]:
    """``count`` A100-SXM4-80GB GPUs with the given UUIDs, on consecutive PCI buses."""
    return [
        GpuInfo(i, uuids[i], "NVIDIA A100-SXM4-80GB", 81920, i, f"00000000:{7 + i:02X}:00.0", 0, (8, 0), True, False)
        for i in range(count)
    ]
