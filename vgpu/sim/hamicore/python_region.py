"""The pure-Python reference decoder behind the API of :class:`vgpu.hamicore.region.Region`.

:class:`PythonRegion` opens exactly like a :class:`Region` (the same native open checks: no
symlink, no FIFO, regular files only) but reads by pread-ing the whole file and decoding it with
:mod:`vgpu.sim.hamicore.reference`: the same snapshots (only ``preads``/``bytes_read`` differ:
one pread of the whole file) and the same error codes, many times slower.  It exists so the
region benchmark can measure it in place of the native reader (``VGPU_BENCH_REGION_READER=python``)
and a test can watch the gate fail when the fast path is lost (tests/integration/bench), and so
tests can check that both readers compute the same thing.
"""

from __future__ import annotations

import os

from vgpu._native import lib
from vgpu.hamicore.layouts import Layout, spec_for_size
from vgpu.hamicore.region import (
    DeviceUsage,
    Region,
    RegionError,
    RegionErrorCode,
    RegionSnapshot,
    snapshot_from_summary,
)
from vgpu.sim.hamicore import reference


def read_python(fd: int, path: str) -> RegionSnapshot:
    """pread the whole file behind ``fd`` and decode it with :mod:`reference` into a snapshot."""
    try:
        size = os.fstat(fd).st_size
    except OSError as exc:
        raise RegionError(RegionErrorCode.IO, path, f"fstat failed: {exc.strerror}", exc.errno) from None
    spec = spec_for_size(size)
    if spec is None:  # never read a file of unknown size (it could be huge)
        raise RegionError(RegionErrorCode.SIZE, path, f"size {size} is not a known region size")
    try:
        data = os.pread(fd, size, 0)
    except OSError as exc:
        raise RegionError(RegionErrorCode.IO, path, f"pread failed: {exc.strerror}", exc.errno) from None
    if len(data) != size:
        raise RegionError(RegionErrorCode.SHORT_READ, path, f"read {len(data)} of {size} bytes (truncated?)")
    ref = reference.decode(data)
    if ref["error"] is not None:
        raise RegionError(RegionErrorCode[ref["error"]], path, f"{ref['error'].lower()} (pure-Python reader)")
    minor = ref["minor_version"]
    bits = 0
    if ref["device_num_raw"] > 16:
        bits |= lib.VGPU_REGION_A_DEVICE_NUM_CLAMPED
    if ref["proc_num_raw"] < 0:
        bits |= lib.VGPU_REGION_A_PROC_NUM_NEGATIVE
    elif ref["proc_num_raw"] > 1024:
        bits |= lib.VGPU_REGION_A_PROC_NUM_CLAMPED
    if ref["invalid_uuid_devices"]:
        bits |= lib.VGPU_REGION_A_BAD_UUID
    if ref["skipped_slots"]:
        bits |= lib.VGPU_REGION_A_SLOT_SKIPPED
    if ref["saturated"]:
        bits |= lib.VGPU_REGION_A_SUM_SATURATED
    if spec.layout is Layout.V1 and minor not in (1, 2):
        bits |= lib.VGPU_REGION_A_UNKNOWN_MINOR
    last_kernel = ref["last_kernel_time"]
    h = (
        int(spec.layout),
        ref["major_version"] or 0,
        minor or 0,
        int(spec.layout is Layout.INTERIM or (spec.layout is Layout.V1 and minor >= 2)),
        int(spec.has_util),
        int(last_kernel is not None),
        size,
        ref["device_num_raw"],
        ref["device_num"],
        ref["proc_num_raw"],
        ref["proc_num"],
        ref["live_procs"],
        ref["skipped_slots"],
        ref["sm_init_flag"],
        ref["utilization_switch"],
        ref["recent_kernel"],
        ref["priority"],
        last_kernel or 0,
        bits,
        1,
        size,
        *ref["limits"],
        *ref["sm_limits"],
    )
    return snapshot_from_summary(
        h, [DeviceUsage.from_dict(d) for d in ref["devices"]], ref["invalid_uuid_devices"], path
    )


class PythonRegion(Region):
    """A :class:`Region` whose :meth:`read` is the pure-Python decode (``PythonRegion.open(path)``)."""

    __slots__ = ()

    def read(self) -> RegionSnapshot:
        return read_python(self.fileno(), self.path)
