"""A straightforward pure-Python decoder of region files — a cross-check, not a production reader.

It reads the whole file and ``struct.unpack``s it with the offsets of
:mod:`vgpu.hamicore.layouts` (the tables of docs/hami-core.md §4.3–§4.5), independently of the C structs.  Tests compare
it with the native reader on every generated and fuzzed file; benchmarks use it as the
baseline.  It has no seqlock retry loop (an odd seqlock in the image means "skipped") and no fd
safety (it follows symlinks, it can block on a FIFO), which is exactly why the monitor uses
:mod:`vgpu.hamicore.region` instead.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from vgpu.hamicore.layouts import MAGIC, MAX_DEVICES, MAX_PROCS, UUID_LEN, Layout, LayoutSpec, spec_for_size

_U64_MAX = 2**64 - 1


def _uuid(raw: bytes) -> tuple[str, str]:
    """(state, text): state is ``empty``, ``valid`` or ``invalid`` (as the native reader)."""
    if raw[0] == 0:
        return "empty", ""
    end = raw.find(b"\0")
    if end < 0 or any(b < 0x20 or b > 0x7E for b in raw[:end]):
        return "invalid", ""
    return "valid", raw[:end].decode("ascii")


def decode(data: bytes) -> dict[str, Any]:
    """Decode a whole file image; ``{"error": <RegionErrorCode name>}`` when it is not a region."""
    spec: LayoutSpec | None = spec_for_size(len(data))
    if spec is None:
        return {"error": "SIZE"}
    magic = struct.unpack_from("<i", data, 0)[0]
    if magic == 0:
        return {"error": "UNINITIALISED"}
    if magic != MAGIC:
        return {"error": "MAGIC"}
    major = minor = None
    if spec.has_version:
        major, minor = struct.unpack_from("<II", data, 4)
        if major != 1:
            return {"error": "VERSION"}
    device_num_raw = struct.unpack_from("<Q", data, spec.off_device_num)[0]
    device_num = min(device_num_raw, MAX_DEVICES)
    proc_num_raw, sw, rk, prio = struct.unpack_from("<iiii", data, spec.off_proc_num)
    proc_num = max(0, min(proc_num_raw, MAX_PROCS))
    limits = struct.unpack_from("<16Q", data, spec.off_limit)
    sm_limits = struct.unpack_from("<16Q", data, spec.off_sm_limit)
    sums = [[0] * 7 for _ in range(device_num)]  # total, context, module, data, offset, monitor, sm_util
    procs = [0] * device_num
    live = skipped = 0
    saturated = False  # some per-device sum overflowed 64 bits (as the native reader's anomaly)
    # v1.2 and interim: a slot whose seqlock is odd is mid-write; in a static image it never settles.
    seqlocked = spec.layout is Layout.INTERIM or (spec.layout is Layout.V1 and (minor or 0) >= 2)
    seqlock_at = spec.slot_seqlock
    assert not seqlocked or seqlock_at is not None  # every seqlocked layout has the slot seqlock
    for i in range(proc_num):
        base = spec.slot(i)
        if seqlocked and seqlock_at is not None and struct.unpack_from("<Q", data, base + seqlock_at)[0] & 1:
            skipped += 1
            continue
        pid = struct.unpack_from("<i", data, base)[0]
        status = struct.unpack_from("<i", data, base + spec.slot_status)[0]
        if pid == 0 or status == 0:
            continue
        live += 1
        for d in range(device_num):
            context, module, dat, offset, total = struct.unpack_from("<5Q", data, spec.used(i, d))
            monitor = struct.unpack_from("<Q", data, spec.monitorused(i, d))[0]
            sm = struct.unpack_from("<Q", data, spec.sm_util(i, d))[0] if spec.has_util else 0
            row = sums[d]
            for k, v in enumerate((total, context, module, dat, offset, monitor, sm)):
                row[k] += v
                if row[k] > _U64_MAX:
                    row[k], saturated = _U64_MAX, True
            if total > 0:
                procs[d] += 1
    devices, invalid = [], []
    for d in range(device_num):
        state, text = _uuid(data[spec.off_uuids + d * UUID_LEN : spec.off_uuids + (d + 1) * UUID_LEN])
        if state == "invalid":
            invalid.append(d)
        if state != "valid":
            continue
        total, context, module, dat, offset, monitor, sm = sums[d]
        devices.append(
            {
                "index": d,
                "uuid": text,
                "limit_bytes": limits[d],
                "sm_limit": sm_limits[d],
                "used_bytes": total,
                "context_bytes": context,
                "module_bytes": module,
                "data_bytes": dat,
                "offset_bytes": offset,
                "monitor_used_bytes": monitor,
                "sm_util": sm,
                "procs": procs[d],
            }
        )
    last_kernel = (
        struct.unpack_from("<Q", data, spec.off_last_kernel_time)[0] if spec.off_last_kernel_time is not None else None
    )
    return {
        "error": None,
        "layout": Layout(spec.layout),
        "major_version": major,
        "minor_version": minor,
        "file_size": len(data),
        "device_num": device_num,
        "device_num_raw": device_num_raw,
        "proc_num": proc_num,
        "proc_num_raw": proc_num_raw,
        "live_procs": live,
        "skipped_slots": skipped,
        "utilization_switch": sw,
        "recent_kernel": rk,
        "priority": prio,
        "last_kernel_time": last_kernel,
        "limits": limits,
        "sm_limits": sm_limits,
        "devices": devices,
        "invalid_uuid_devices": invalid,
        "sm_init_flag": struct.unpack_from("<i", data, spec.off_sm_init_flag)[0],
        "saturated": saturated,
    }


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The straightforward way: read the whole file, then decode it."""
    with open(path, "rb") as f:
        return decode(f.read())
