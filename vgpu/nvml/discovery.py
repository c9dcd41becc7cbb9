"""Device discovery through nvidia-ml-py: what each physical GPU is, in host NVML index order.

Discovery runs rarely (startup, after a MIG mode change re-enumerates devices), so it uses
the convenient Python binding; the per-tick hot path is the cffi sampler
(``vgpu.nvml.sampler``).  Every ``discover_gpus`` call is one ``nvmlInit`` ... ``nvmlShutdown``
pair, so it never leaves NVML initialised behind its caller's back.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml

from vgpu.nvml.device import GpuInfo
from vgpu.nvml.errors import NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NvmlError
from vgpu.nvml.library import init_nvml, pynvml_text

log = logging.getLogger(__name__)

T = TypeVar("T")
MIB = 1024 * 1024

# "Not there" answers: old drivers lack the symbol, some GPUs/platforms answer NOT_SUPPORTED.
_ABSENT = (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND)


def _call(library: str, what: str, fn: Callable[..., T], *args: Any) -> T:
    """Run one pynvml call, turning its exception into an ``NvmlError`` naming call and library."""
    try:
        return fn(*args)
    except pynvml.NVMLError as exc:
        raise NvmlError(exc.value, str(exc), function=what, library=library) from exc


def pci_sysfs_numa_node(pci_bus_id: str, sysfs_root: str | pathlib.Path = "/sys") -> int | None:
    """NUMA node of a PCI device from sysfs (what NVML-less tools read); None when unknown.

    NVML writes the domain with 8 hex digits (``00000000:07:00.0``); sysfs uses 4
    (``0000:07:00.0``) and lower case.
    """
    try:
        domain, rest = pci_bus_id.strip().split(":", 1)
        name = f"{int(domain, 16):04x}:{rest.lower()}"
        raw = (pathlib.Path(sysfs_root) / "bus/pci/devices" / name / "numa_node").read_text().strip()
        node = int(raw)
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def _numa_node(library: str, index: int, handle: Any, pci_bus_id: str, sysfs_root: str | pathlib.Path) -> int | None:
    fn = getattr(pynvml, "nvmlDeviceGetNumaNodeId", None)
    if fn is not None:
        try:
            node = int(fn(handle))
            return node if node >= 0 else None
        except pynvml.NVMLError as exc:
            if exc.value not in _ABSENT:
                raise NvmlError(
                    exc.value, str(exc), function=f"nvmlDeviceGetNumaNodeId(device {index})", library=library
                ) from exc
    # Drivers before nvmlDeviceGetNumaNodeId: the kernel knows it.
    return pci_sysfs_numa_node(pci_bus_id, sysfs_root)


def _mig(library: str, index: int, handle: Any) -> tuple[bool, bool]:
    """(capable, enabled): NOT_SUPPORTED from nvmlDeviceGetMigMode means not MIG-capable (docs/mig.md §5.1)."""
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError as exc:
        if exc.value in _ABSENT:
            return False, False
        raise NvmlError(exc.value, str(exc), function=f"nvmlDeviceGetMigMode(device {index})", library=library) from exc
    return True, current == pynvml.NVML_DEVICE_MIG_ENABLE


def _describe(library: str, index: int, sysfs_root: str | pathlib.Path) -> GpuInfo:
    def call(what: str, fn: Callable[..., T], *args: Any) -> T:
        return _call(library, f"{what}(device {index})", fn, *args)

    handle = call("nvmlDeviceGetHandleByIndex", pynvml.nvmlDeviceGetHandleByIndex, index)
    pci = call("nvmlDeviceGetPciInfo", pynvml.nvmlDeviceGetPciInfo, handle)
    pci_bus_id = pynvml_text(pci.busId)
    name = pynvml_text(call("nvmlDeviceGetName", pynvml.nvmlDeviceGetName, handle))
    total_mib, memory_supported = _memory_total_mib(library, index, handle, name)
    major, minor_cc = call("nvmlDeviceGetCudaComputeCapability", pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    mig_capable, mig_mode = _mig(library, index, handle)
    return GpuInfo(
        index=index,
        uuid=pynvml_text(call("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, handle)),
        name=name,
        memory_total_mib=total_mib,
        minor=int(call("nvmlDeviceGetMinorNumber", pynvml.nvmlDeviceGetMinorNumber, handle)),
        pci_bus_id=pci_bus_id,
        numa_node=_numa_node(library, index, handle, pci_bus_id, sysfs_root),
        compute_capability=(int(major), int(minor_cc)),
        mig_capable=mig_capable,
        mig_mode=mig_mode,
        memory_supported=memory_supported,
    )


def _memory_total_mib(library: str, index: int, handle: Any, name: str) -> tuple[int, bool]:
    """(memory.total in MiB, True), or (0, False) when the GPU has no memory of its own to report.

    Unified-memory parts (GB10 and other GPUs sharing the host's memory) answer NOT_SUPPORTED;
    that is a property of the GPU, not an error, so discovery goes on (docs/kubelet-api.md §4.1).
    """
    try:
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    except pynvml.NVMLError as exc:
        if exc.value not in _ABSENT:
            raise NvmlError(
                exc.value, str(exc), function=f"nvmlDeviceGetMemoryInfo(device {index})", library=library
            ) from exc
        log.warning(
            "GPU %d (%s): nvmlDeviceGetMemoryInfo answers %s (a unified-memory GPU?): no memory to share",
            index,
            name,
            "NOT_SUPPORTED" if exc.value == NVML_ERROR_NOT_SUPPORTED else "FUNCTION_NOT_FOUND",
        )
        return 0, False
    return int(memory.total) // MIB, True


def discover_gpus(library: str | None = None, *, sysfs_root: str | pathlib.Path = "/sys") -> list[GpuInfo]:
    """Every GPU NVML sees, in host NVML index order.

    ``library`` is the ``--nvml-library`` value (None: ``VGPU_NVML_LIBRARY``, then the
    system's).  ``sysfs_root`` is only read for the NUMA node on drivers whose NVML cannot
    tell it.  Raises ``NvmlLibraryError`` when the library cannot be loaded and
    ``NvmlError`` (naming the call, device and library) when an NVML call fails.
    """
    path = init_nvml(library)
    try:
        count = _call(path, "nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount)
        return [_describe(path, index, sysfs_root) for index in range(count)]
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as exc:  # never mask the real result or error
            log.warning("nvmlShutdown failed for %s: %s", path, exc)
