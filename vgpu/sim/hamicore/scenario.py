"""Region files as libvgpu leaves them: the standard writer-made scenario and container directories.

Shared by the tests and the benchmarks: :func:`standard_region` (five processes on two GPUs, with
its expected decode :data:`STANDARD_EXPECTED`) and :func:`add_container`, which writes a region
into ``<hook>/containers/<uid>_<ctr>/`` where the monitor looks for it.
"""

from __future__ import annotations

import os
import pathlib
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from vgpu.hamicore import layouts
from vgpu.sim.hamicore.writer import RegionWriter

MIB = 2**20
GIB = 2**30
NOW = 1_800_000_000
UUIDS = ("GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e", "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c")
VARIANTS = ("original", "v0", "v1.1", "v1.2", "interim")

# Limits as Allocate would hand them out (plus a global fallback and a priority).
ENV = {
    "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
    "CUDA_DEVICE_MEMORY_LIMIT_1": "2048m",
    "CUDA_DEVICE_MEMORY_LIMIT": "1g",
    "CUDA_DEVICE_SM_LIMIT": "50",
    "CUDA_DEVICE_SM_LIMIT_0": "50",
    "CUDA_DEVICE_SM_LIMIT_1": "30",
    "CUDA_TASK_PRIORITY": "3",
}


def standard_region(path: pathlib.Path, variant: str) -> pathlib.Path:
    """Five processes on two GPUs, one exited normally, one SIGKILLed (slot kept), one suspended.

    Expected per device (slots in use: 101, 102, 104 (killed, still counted), 105 (suspended)):
      d0: 100 + (300 ctx + 1024) + 400 + 50 = 1874 MiB, context 300 MiB, sm_util 20 + 15 = 35
      d1: 10 + 512 + 40 + 5 = 567 MiB, sm_util 7
    (sm_util is 0 on the original layout, which has no device_util.)
    pid 103 exited normally: its 777 MiB on d0 are not counted.
    """
    w = RegionWriter.create(path, variant, env=ENV, now=NOW)
    try:
        w.init_devices(UUIDS)
        usage = {101: (100, 10), 102: (1024, 512), 103: (777, 77), 104: (400, 40), 105: (50, 5)}
        for pid, (d0, d1) in usage.items():
            w.attach(pid, now=NOW)
            if pid == 102:
                w.add_memory(pid, 0, 300 * MIB, "context")
                w.set_hostpid(pid, 40102)
            w.add_memory(pid, 0, d0 * MIB)
            w.add_memory(pid, 1, d1 * MIB)
        util = w.spec.has_util  # the original layout has monitorused but no device_util
        w.set_monitor(102, 0, monitor_used=1500 * MIB, sm_util=20 if util else None)
        w.set_monitor(104, 0, sm_util=15 if util else None)
        w.set_monitor(104, 1, monitor_used=45 * MIB, sm_util=7 if util else None)
        w.detach(103)
        w.kill(104)
        w.set_status(105, 2)
        w.kernel_launch(now=NOW + 5)
    finally:
        w.close()
    return path


STANDARD_EXPECTED = {
    "proc_num": 5,
    "live_procs": 4,
    "priority": 3,
    "limits": (3000 * MIB, 2048 * MIB) + (GIB,) * 14,
    "sm_limits": (50, 30) + (50,) * 14,
    "devices": [
        {
            "index": 0,
            "uuid": UUIDS[0],
            "limit_bytes": 3000 * MIB,
            "sm_limit": 50,
            "used_bytes": 1874 * MIB,
            "context_bytes": 300 * MIB,
            "module_bytes": 0,
            "data_bytes": 1574 * MIB,
            "offset_bytes": 0,
            "monitor_used_bytes": 1500 * MIB,
            "sm_util": 35,
            "procs": 4,
        },
        {
            "index": 1,
            "uuid": UUIDS[1],
            "limit_bytes": 2048 * MIB,
            "sm_limit": 30,
            "used_bytes": 567 * MIB,
            "context_bytes": 0,
            "module_bytes": 0,
            "data_bytes": 567 * MIB,
            "offset_bytes": 0,
            "monitor_used_bytes": 45 * MIB,
            "sm_util": 7,
            "procs": 4,
        },
    ],
}


def container_dir(hook: pathlib.Path, uid: str, ctr: str) -> pathlib.Path:
    d = hook / "containers" / f"{uid}_{ctr}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_region(
    path: pathlib.Path,
    *,
    variant: str = "v1.2",
    uuids: Sequence[str] = UUIDS,
    limits_mib: Sequence[int] = (3000, 2048),
    procs: Iterable[tuple[int, Sequence[int]]] = (),
    sm_util: dict[tuple[int, int], int] | None = None,
    priority: int | None = None,
    context_mib: dict[tuple[int, int], int] | None = None,
    now: int | None = NOW,
    keep_open: bool = False,
) -> RegionWriter | pathlib.Path:
    """A region as libvgpu writes it: ``procs`` = [(pid, [MiB on d0, MiB on d1, ...])]."""
    env = {f"CUDA_DEVICE_MEMORY_LIMIT_{i}": f"{m}m" for i, m in enumerate(limits_mib)}
    if priority is not None:
        env["CUDA_TASK_PRIORITY"] = str(priority)
    w = RegionWriter.create(path, variant, env=env, now=now)
    w.init_devices(list(uuids))
    for pid, per_dev in procs:
        w.attach(pid, now=now)
        for d, mib in enumerate(per_dev):
            if context_mib and (pid, d) in context_mib:
                w.add_memory(pid, d, context_mib[(pid, d)] * MIB, "context")
            if mib:
                w.add_memory(pid, d, mib * MIB)
    for (pid, d), util in (sm_util or {}).items():
        w.set_monitor(pid, d, sm_util=util)
    if keep_open:
        return w
    w.close()
    return path


def add_container(hook: pathlib.Path, uid: str, ctr: str, name: str = "a.cache", **kw: Any) -> pathlib.Path:
    """A container directory under ``hook`` with one region (``kw`` as for :func:`write_region`)."""
    d = container_dir(hook, uid, ctr)
    write_region(d / name, **kw)
    return d / name


def stuck_seqlock_region(path: pathlib.Path, *, odd: bool = True) -> pathlib.Path:
    """A v1.2 region with all 1,024 slots live and (``odd``) every seqlock odd: never settles.

    What a hostile container can leave behind to make every read of its region retry.  Each slot
    holds 1 MiB on device 0 (so a consistent read sums 1,024 MiB).  Written with one ``pwrite`` of
    the whole slot array: attaching 1,024 processes one by one takes seconds.
    """
    write_region(path, procs=[(1, [1])])
    spec = layouts.V1
    seqlock = spec.slot_seqlock
    assert seqlock is not None
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        slot0 = os.pread(fd, spec.slot_size, spec.slot(0))
        slots = bytearray()
        for i in range(layouts.MAX_PROCS):
            slot = bytearray(slot0)
            struct.pack_into("<i", slot, 0, i + 1)
            struct.pack_into("<Q", slot, seqlock, 1 if odd else 2)
            slots += slot
        os.pwrite(fd, bytes(slots), spec.slot(0))
        os.pwrite(fd, struct.pack("<i", layouts.MAX_PROCS), spec.off_proc_num)
    finally:
        os.close(fd)
    return path
