"""Per-tick GPU usage of every device in ONE native call (the monitor's hot path).

``Sampler.sample()`` returns immutable dataclasses; ``Sampler.sample_into()`` is the
zero-copy variant that only refreshes the preallocated cffi arrays (allocated once per
device count with ``ffi.new``) and returns how many devices it wrote.

Every NVML answer is kept per device and per family (``*_rc``): a device whose
utilisation is ``NOT_SUPPORTED`` (MIG-enabled GPUs, HAMi#1089) still has its memory
values, and one failing device never hides the others (monitor-metrics.md §4.1).

Per-process SM utilisation comes from ``nvmlDeviceGetProcessUtilization`` asked for samples
newer than the newest one already seen on that device, so ``sm_util`` is ``None`` when
the process produced no new sample since the previous ``sample()`` (NVML answers
``NOT_FOUND`` when no process did; ``process_util_rc`` then says so).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from vgpu._native import ffi, lib
from vgpu.nvml.errors import NVML_SUCCESS
from vgpu.nvml.native import NativeNvml

DEFAULT_MAX_PROCESSES = 64


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One running compute process on a device."""

    pid: int
    used_memory_bytes: int | None     # None: NVML could not tell (NVML_VALUE_NOT_AVAILABLE)
    gpu_instance_id: int | None       # None: not on a MIG instance
    compute_instance_id: int | None
    sm_util: int | None               # percent; None: no new utilisation sample
    mem_util: int | None


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One device (host NVML index order).  A value is None when its ``*_rc`` is not 0."""

    index: int
    memory_rc: int
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    memory_free_bytes: int | None
    utilization_rc: int
    utilization_gpu: int | None
    utilization_memory: int | None
    processes_rc: int
    processes: tuple[ProcessSample, ...]
    process_total: int                # processes NVML reported; > len(processes) when truncated
    processes_truncated: bool
    process_util_rc: int


@dataclass(frozen=True, slots=True)
class NodeSample:
    """Every device of the node at one instant (``time.monotonic()``)."""

    monotonic: float
    devices: tuple[DeviceSample, ...]


def _opt_id(value: int) -> int | None:
    return None if value == lib.VNV_ID_NONE else int(value)


def _opt_util(value: int) -> int | None:
    return None if value == lib.VNV_NO_SAMPLE else int(value)


def _process(row: Any) -> ProcessSample:
    used = row.used_memory
    return ProcessSample(
        pid=int(row.pid),
        used_memory_bytes=None if used == lib.VNV_VALUE_NOT_AVAILABLE else int(used),
        gpu_instance_id=_opt_id(row.gpu_instance_id),
        compute_instance_id=_opt_id(row.compute_instance_id),
        sm_util=_opt_util(row.sm_util),
        mem_util=_opt_util(row.mem_util),
    )


def _device(index: int, d: Any, rows: Any, base: int) -> DeviceSample:
    mem_ok = d.memory_rc == NVML_SUCCESS
    util_ok = d.utilization_rc == NVML_SUCCESS
    return DeviceSample(
        index=index,
        memory_rc=int(d.memory_rc),
        memory_total_bytes=int(d.memory_total) if mem_ok else None,
        memory_used_bytes=int(d.memory_used) if mem_ok else None,
        memory_free_bytes=int(d.memory_free) if mem_ok else None,
        utilization_rc=int(d.utilization_rc),
        utilization_gpu=int(d.utilization_gpu) if util_ok else None,
        utilization_memory=int(d.utilization_memory) if util_ok else None,
        processes_rc=int(d.processes_rc),
        processes=tuple(_process(rows[base + k]) for k in range(d.process_count)),
        process_total=int(d.process_total),
        processes_truncated=bool(d.processes_truncated),
        process_util_rc=int(d.process_util_rc),
    )


class Sampler:
    """Samples every device of ``library`` (``--nvml-library``; None: env var, then system).

    ``max_processes`` bounds the rows kept per device; NVML's full count is still
    reported and ``processes_truncated`` set.  Pass ``native`` to share a context.
    Thread-safe: calls are serialised.
    """

    def __init__(self, library: str | None = None, *, max_processes: int = DEFAULT_MAX_PROCESSES,
                 native: NativeNvml | None = None) -> None:
        if not 0 <= max_processes <= lib.VNV_MAX_PROCESS_SCRATCH:
            raise ValueError(f"max_processes must be 0..{lib.VNV_MAX_PROCESS_SCRATCH}, got {max_processes}")
        self._owns_native = native is None
        self.native = native if native is not None else NativeNvml(library)
        self.processes_per_device = max_processes
        self._lock = threading.Lock()
        self._allocate(self.native.device_count())

    def _allocate(self, count: int) -> None:
        devices = ffi.new("vnv_device_sample[]", max(count, 1))
        processes = ffi.new("vnv_process_sample[]", max(count * self.processes_per_device, 1))
        # One assignment, so a concurrent sample_into never pairs a capacity with other arrays.
        self._buffers: tuple[int, Any, Any] = (count, devices, processes)

    @property
    def capacity(self) -> int:
        return self._buffers[0]

    @property
    def devices(self) -> Any:
        """``vnv_device_sample[]`` filled by the last ``sample_into``."""
        return self._buffers[1]

    @property
    def processes(self) -> Any:
        """``vnv_process_sample[]`` filled by the last ``sample_into``."""
        return self._buffers[2]

    @property
    def library(self) -> str:
        return self.native.library

    def _fill(self) -> tuple[int, Any, Any]:
        native = self.native
        capacity, devices, processes = self._buffers
        with native.lock:
            n = lib.vnv_sample(native.ctx, devices, capacity, processes, self.processes_per_device)
        if n < 0:  # only when the scratch buffers cannot be allocated
            raise MemoryError("vnv_sample could not allocate its scratch buffers")
        return n, devices, processes

    def sample_into(self) -> int:
        """Zero-copy hot path: refill ``self.devices`` / ``self.processes``; returns the device count.

        Device ``i``'s process rows start at ``self.processes[i * self.processes_per_device]``.
        The arrays are overwritten by the next call (and replaced by ``refresh()``).
        """
        with self._lock:
            return self._fill()[0]

    def sample(self) -> NodeSample:
        """Every device's memory, utilisation, processes and per-process SM utilisation."""
        with self._lock:  # the arrays stay ours until converted
            n, devs, rows = self._fill()
            now = time.monotonic()
            ppd = self.processes_per_device
            return NodeSample(now, tuple(_device(i, devs[i], rows, i * ppd) for i in range(n)))

    def refresh(self) -> int:
        """Re-enumerate devices (e.g. after a MIG mode change) and resize the arrays."""
        with self._lock:
            count = self.native.refresh()
            if count != self.capacity:
                self._allocate(count)
            return count

    def close(self) -> None:
        if self._owns_native:
            self.native.close()

    def __enter__(self) -> "Sampler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
