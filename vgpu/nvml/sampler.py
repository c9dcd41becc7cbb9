"""Per-tick GPU usage of every device in ONE native call (the monitor's hot path).

``Sampler.sample()`` returns fresh dataclasses (each device's ``processes`` built on first
read, so a caller that reads none pays for none); ``Sampler.sample_into()`` is the
zero-copy variant that only refreshes the preallocated cffi arrays (allocated once per
device count with ``ffi.new``) and returns how many devices it wrote.

Every NVML answer is kept per device and per family (``*_rc``): a device whose
utilisation is ``NOT_SUPPORTED`` (MIG-enabled GPUs, HAMi#1089) still has its memory
values, and one failing device never hides the others (docs/metrics.md §4.1).

Per-process SM utilisation comes from ``nvmlDeviceGetProcessUtilization`` asked for samples
newer than the newest one already seen on that device, so ``sm_util`` is ``None`` when
the process produced no new sample since the previous ``sample()`` (NVML answers
``NOT_FOUND`` when no process did; ``process_util_rc`` then says so).
"""

from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from vgpu._native import ffi, lib
from vgpu.nvml.context import NvmlContext
from vgpu.nvml.errors import NVML_SUCCESS

DEFAULT_MAX_PROCESSES = 64


# Plain slotted dataclasses (not frozen): a frozen dataclass costs ~5x more to build, and
# ``sample()`` builds one per process per tick.  Each call returns fresh objects that the
# sampler never touches again, so callers may share them freely; treat them as read-only.
@dataclass(slots=True)
class ProcessSample:
    """One running compute process on a device."""

    pid: int
    used_memory_bytes: int | None  # None: NVML could not tell (NVML_VALUE_NOT_AVAILABLE)
    gpu_instance_id: int | None  # None: not on a MIG instance
    compute_instance_id: int | None
    sm_util: int | None  # percent; None: no new utilisation sample
    mem_util: int | None


@dataclass(slots=True)
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
    process_total: int  # processes NVML reported; > len(processes) when truncated
    processes_truncated: bool
    process_util_rc: int


@dataclass(slots=True)
class NodeSample:
    """Every device of the node at one instant (``time.monotonic()``)."""

    monotonic: float
    devices: tuple[DeviceSample, ...]


# Raw bytes of vnv_device_sample / vnv_process_sample (native/nvml_sampler.h): unpacking
# a whole struct with one C-level struct call is much cheaper than one cdata read per field.
_DEVICE = struct.Struct("=5i7I4Q")
_PROCESS = struct.Struct("=3I2iI2Q")
if _DEVICE.size != ffi.sizeof("vnv_device_sample") or _PROCESS.size != ffi.sizeof("vnv_process_sample"):
    raise ImportError(
        "vgpu._native is out of date with vgpu/nvml/sampler.py (struct size mismatch); rebuild the extension"
    )
_ID_NONE = lib.VNV_ID_NONE
_NO_SAMPLE = lib.VNV_NO_SAMPLE
_NOT_AVAILABLE = lib.VNV_VALUE_NOT_AVAILABLE


def _processes(raw: bytes) -> tuple[ProcessSample, ...]:
    return tuple(
        [
            ProcessSample(
                pid,
                None if used == _NOT_AVAILABLE else used,
                None if gi == _ID_NONE else gi,
                None if ci == _ID_NONE else ci,
                None if sm == _NO_SAMPLE else sm,
                None if mem == _NO_SAMPLE else mem,
            )
            for pid, gi, ci, sm, mem, _r, used, _ts in _PROCESS.iter_unpack(raw)
        ]
    )


_PROCESSES_SLOT: Any = DeviceSample.__dict__["processes"]  # the dataclass's own slot (a member descriptor)


class _SampledDevice(DeviceSample):
    """A ``DeviceSample`` whose ``processes`` are built on first read from the rows copied
    out of the native array (most callers never read them: the monitor samples without
    process rows, the MIG manager reads one device), so ``sample()`` does not pay one
    object per process per tick.  It is still a ``DeviceSample`` in every other respect."""

    __slots__ = ("_rows",)
    _rows: bytes | None

    @property
    def processes(self) -> tuple[ProcessSample, ...]:
        rows = self._rows
        if rows is not None:  # two racing first reads build equal tuples; either may win
            _PROCESSES_SLOT.__set__(self, _processes(rows))
            self._rows = None
        return _PROCESSES_SLOT.__get__(self)

    @processes.setter
    def processes(self, value: tuple[ProcessSample, ...]) -> None:
        _PROCESSES_SLOT.__set__(self, value)
        self._rows = None


def _convert(n: int, devices: Any, processes: Any, per_device: int) -> tuple[DeviceSample, ...]:
    proc_raw = ffi.buffer(processes, n * per_device * _PROCESS.size) if per_device else None
    row_bytes = per_device * _PROCESS.size
    out = []
    base = 0
    for i, (
        _handle_rc,
        mem_rc,
        util_rc,
        procs_rc,
        putil_rc,
        ugpu,
        umem,
        count,
        total,
        truncated,
        _samples,
        _r,
        mtotal,
        mused,
        mfree,
        _seen,
    ) in enumerate(_DEVICE.iter_unpack(ffi.buffer(devices, n * _DEVICE.size))):
        if mem_rc != NVML_SUCCESS:
            mtotal = mused = mfree = None
        if util_rc != NVML_SUCCESS:
            ugpu = umem = None
        dev = _SampledDevice(
            i, mem_rc, mtotal, mused, mfree, util_rc, ugpu, umem, procs_rc, (), total, truncated != 0, putil_rc
        )
        if count and proc_raw is not None:  # copied now: the arrays are refilled by the next call
            dev._rows = proc_raw[base : base + count * _PROCESS.size]
        base += row_bytes
        out.append(dev)
    return tuple(out)


class Sampler:
    """Samples every device of ``library`` (``--nvml-library``; None: env var, then system).

    ``max_processes`` bounds the rows kept per device; NVML's full count is still
    reported and ``processes_truncated`` set.  Pass ``native`` to share a context.
    Thread-safe: calls are serialised.
    """

    def __init__(
        self,
        library: str | None = None,
        *,
        max_processes: int = DEFAULT_MAX_PROCESSES,
        native: NvmlContext | None = None,
    ) -> None:
        if not 0 <= max_processes <= lib.VNV_MAX_PROCESS_SCRATCH:
            raise ValueError(f"max_processes must be 0..{lib.VNV_MAX_PROCESS_SCRATCH}, got {max_processes}")
        self._owns_native = native is None
        self.native = native if native is not None else NvmlContext(library)
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
        with native.lock:
            ctx = native.ctx
            count = lib.vnv_device_count(ctx)
            if count != self._buffers[0]:  # the context was refreshed (possibly by a sharer)
                self._allocate(count)
            capacity, devices, processes = self._buffers
            n = lib.vnv_sample(ctx, devices, capacity, processes, self.processes_per_device)
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
            return NodeSample(now, _convert(n, devs, rows, self.processes_per_device))

    def refresh(self) -> int:
        """Re-enumerate devices (e.g. after a MIG mode change); the arrays follow on the next sample."""
        return self.native.refresh()

    def close(self) -> None:
        if self._owns_native:
            self.native.close()

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
