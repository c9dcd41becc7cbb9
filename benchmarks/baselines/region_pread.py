"""The competent pure-Python region reader: what an engineer who read the layout would write.

Baseline of ``region.native_vs_python`` (benchmarks/test_region_reader.py).  Like ours it keeps
the descriptor open and reads only what it needs with the same four calls per file: the tail
(``proc_num`` ... ``last_kernel_time``), the header with the live slots' seqlock words (one
``preadv``), the live slots (one ``pread``) and their seqlock words again (one ``preadv``); it
decodes with ``struct`` and sums the live slots per device.  v1.2 files only (the benchmark's):
no layout detection, no hostile-input checks, which only flatters it.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from vgpu.hamicore import layouts

L = layouts.V1
TAIL = struct.Struct("<iiiiQ")  # proc_num, utilization_switch, recent_kernel, priority, last_kernel_time
HEAD = struct.Struct("<iIIi")  # initialized_flag, major, minor, sm_init_flag
USED = struct.Struct("<QQQQQ")  # context, module, data, offset, total
Q = struct.Struct("<Q")
I32 = struct.Struct("<i")
LIMITS = struct.Struct("<16Q")
SEQ_BEFORE = L.slot_seqlock
SEQ_AFTER = L.slot_size - L.slot_seqlock - 8


class PreadRegion:
    """One open v1.2 region file, read with preads of only the needed bytes."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.hdr = bytearray(L.off_procs)
        self.scratch = bytearray(L.slot_size)
        self.s1 = [bytearray(8) for _ in range(8)]
        self.s2 = [bytearray(8) for _ in range(8)]

    def _seq_iov(self, seq: list[bytearray], n: int) -> list[Any]:
        iov: list[Any] = []
        view = memoryview(self.scratch)
        for i in range(n):
            iov += [view[:SEQ_BEFORE], seq[i], view[:SEQ_AFTER]]
        return iov

    def read(self) -> dict[str, Any]:
        fd = self.fd
        proc_num, switch, recent, priority, last_kernel = TAIL.unpack(os.pread(fd, TAIL.size, L.off_proc_num))
        n = max(0, min(proc_num, 8))
        os.preadv(fd, [self.hdr, *self._seq_iov(self.s1, n)], 0)
        slots = os.pread(fd, n * L.slot_size, L.off_procs)
        os.preadv(fd, self._seq_iov(self.s2, n), L.off_procs)
        hdr = self.hdr
        magic, major, minor, sm_init = HEAD.unpack_from(hdr)
        ndev = min(Q.unpack_from(hdr, L.off_device_num)[0], 16)
        limits = LIMITS.unpack_from(hdr, L.off_limit)
        sm_limits = LIMITS.unpack_from(hdr, L.off_sm_limit)
        sums = [[0] * 8 for _ in range(ndev)]  # 5 used fields, monitorused, sm_util, procs
        live = 0
        for i in range(n):
            base = i * L.slot_size
            if self.s1[i] != self.s2[i] or Q.unpack_from(self.s1[i])[0] & 1:
                continue
            if I32.unpack_from(slots, base)[0] == 0 or I32.unpack_from(slots, base + L.slot_status)[0] == 0:
                continue
            live += 1
            for d in range(ndev):
                used = USED.unpack_from(slots, base + L.slot_used + d * L.used_size)
                s = sums[d]
                for k in range(5):
                    s[k] += used[k]
                s[5] += Q.unpack_from(slots, base + L.slot_monitorused + 8 * d)[0]
                s[6] += Q.unpack_from(slots, base + L.slot_util + d * L.util_size + 16)[0]
                s[7] += used[4] > 0
        devices = []
        for d in range(ndev):
            raw = hdr[L.off_uuids + d * 96 : L.off_uuids + (d + 1) * 96]
            uuid = bytes(raw[: raw.index(0)]).decode("ascii")
            s = sums[d]
            devices.append((d, uuid, limits[d], sm_limits[d], s[4], s[0], s[1], s[2], s[3], s[5], s[6], s[7]))
        return {
            "version": (major, minor),
            "sm_init_flag": sm_init,
            "proc_num": proc_num,
            "live_procs": live,
            "utilization_switch": switch,
            "recent_kernel": recent,
            "priority": priority,
            "last_kernel_time": last_kernel,
            "limits": limits,
            "sm_limits": sm_limits,
            "devices": devices,
        }

    def close(self) -> None:
        os.close(self.fd)
