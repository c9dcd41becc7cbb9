"""A competent ctypes NVML sampler: the same 4 calls per device as ``Sampler.sample``, no more.

Baseline of ``nvml.sample_dataclasses`` (benchmarks/test_nvml_sampler.py).  nvidia-ml-py makes
48 calls for what ours does in 32 (it asks for the process and sample counts first); this one
makes exactly ours: nvmlDeviceGetMemoryInfo, nvmlDeviceGetUtilizationRates,
nvmlDeviceGetComputeRunningProcesses_v3 and nvmlDeviceGetProcessUtilization (since the newest
sample seen), into ctypes buffers sized once, and returns plain tuples.
"""

from __future__ import annotations

import ctypes

MAX_PROCS = 256


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class UtilSample(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("timeStamp", ctypes.c_ulonglong),
        ("smUtil", ctypes.c_uint),
        ("memUtil", ctypes.c_uint),
        ("encUtil", ctypes.c_uint),
        ("decUtil", ctypes.c_uint),
    ]


class CtypesSampler:
    """Every device of ``library`` (NVML initialised here; the caller's init is reference-counted)."""

    def __init__(self, library: str) -> None:
        lib = ctypes.CDLL(library)
        if lib.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit_v2 failed")
        n = ctypes.c_uint()
        lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
        self.handles = []
        for i in range(n.value):
            h = ctypes.c_void_p()
            lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
            self.handles.append(h)
        self.mem_fn = lib.nvmlDeviceGetMemoryInfo
        self.util_fn = lib.nvmlDeviceGetUtilizationRates
        self.procs_fn = lib.nvmlDeviceGetComputeRunningProcesses_v3
        self.putil_fn = lib.nvmlDeviceGetProcessUtilization
        self.putil_fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong]
        self.mem, self.util = Memory(), Utilization()
        self.procs = (ProcessInfo * MAX_PROCS)()
        self.samples = (UtilSample * MAX_PROCS)()
        self.count = ctypes.c_uint()
        self.last_seen = [0] * len(self.handles)

    def sample(self) -> list[tuple]:
        """Per device ``(total, used, util_gpu, util_mem, [(pid, used bytes, sm util | None)])``."""
        out = []
        mem, util, procs, samples, count = self.mem, self.util, self.procs, self.samples, self.count
        mref, uref, cref = ctypes.byref(mem), ctypes.byref(util), ctypes.byref(count)
        for i, h in enumerate(self.handles):
            self.mem_fn(h, mref)
            ugpu = umem = None
            if self.util_fn(h, uref) == 0:
                ugpu, umem = util.gpu, util.memory
            count.value = MAX_PROCS
            rows: list[tuple] = []
            if self.procs_fn(h, cref, procs) == 0:
                rows = [(p.pid, p.usedGpuMemory) for p in procs[: count.value]]
            count.value = MAX_PROCS
            sm: dict[int, int] = {}
            if self.putil_fn(h, samples, cref, self.last_seen[i]) == 0:
                newest = self.last_seen[i]
                for s in samples[: count.value]:
                    sm[s.pid] = s.smUtil
                    newest = max(newest, s.timeStamp)
                self.last_seen[i] = newest
            out.append((mem.total, mem.used, ugpu, umem, [(pid, used, sm.get(pid)) for pid, used in rows]))
        return out
