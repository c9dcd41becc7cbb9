"""Shared-region reader benchmarks (issue 5).

1. 100 container files x 4 live processes x 2 devices (v1.2, seqlocked): the native reader
   through its public API (``Region.read()`` on fds kept open, as the monitor does) against a
   competent pure-Python reader (benchmarks/baselines/region_pread.py: descriptors kept open,
   the same four preads of only the needed bytes, ``struct`` decoding).  Gate
   ``region.native_vs_python``.  The whole-file reader (open, read 2 MB, ``struct.unpack``) is
   timed too and reported, not gated: nobody competent reads 2 MB to use 10 KB.
2. The cost follows the live slots, not the 1,024-slot capacity: the same 1,024-slot file read
   with 4 live slots against all 1,024 live.  Gate ``region.live_slots``
   (>= 10x; a capacity-bound reader would be ~1x).

``VGPU_BENCH_REGION_READER=python`` measures the pure-Python reader behind the same API
(:class:`~vgpu.sim.hamicore.python_region.PythonRegion`) as "ours" in 1., so that gate must
fail at about 1x: how tests/integration/bench proves the gate can fail.
"""

from __future__ import annotations

import os
import struct

import pytest

from benchmarks.baselines.region_pread import PreadRegion
from benchmarks.conftest import median_time, ratio_gate, rounds
from vgpu.hamicore import layouts
from vgpu.hamicore.region import Region
from vgpu.sim.hamicore import reference
from vgpu.sim.hamicore.python_region import PythonRegion
from vgpu.sim.hamicore.scenario import MIB, UUIDS
from vgpu.sim.hamicore.writer import RegionWriter

READER_ENV = "VGPU_BENCH_REGION_READER"


def _reader() -> type[Region]:
    """The reader measured as ours: the native one, or the pure-Python one with ``READER_ENV=python``."""
    value = os.environ.get(READER_ENV, "") or "native"
    if value not in ("native", "python"):
        raise ValueError(f"{READER_ENV}={value!r}: expected native or python")
    return PythonRegion if value == "python" else Region


def _container_file(path, live: int) -> str:
    with RegionWriter.create(
        path, "v1.2", env={"CUDA_DEVICE_MEMORY_LIMIT_0": "3000m", "CUDA_DEVICE_MEMORY_LIMIT_1": "2048m"}
    ) as w:
        w.init_devices(UUIDS)
        for pid in range(1, live + 1):
            w.attach(pid)
            w.add_memory(pid, 0, 64 * MIB)
            w.add_memory(pid, 1, 32 * MIB)
    return str(path)


@pytest.fixture(scope="module")
def hundred_files(tmp_path_factory) -> list[str]:
    base = tmp_path_factory.mktemp("regions")
    return [_container_file(base / f"{k:03d}.cache", 4) for k in range(100)]


def test_native_reader_vs_pure_python(benchmark, hundred_files):
    regions = [_reader().open(p) for p in hundred_files]
    competent = [PreadRegion(p) for p in hundred_files]
    try:

        def native():
            return [r.read() for r in regions]

        def pure_python():
            return [r.read() for r in competent]

        # Same answers first: the comparison is between correct readers.
        for snap, mine, ref in zip(
            native(), pure_python(), [reference.read_file(p) for p in hundred_files], strict=True
        ):
            assert [tuple(d) for d in snap.devices] == mine["devices"]
            assert [d.used_bytes for d in snap.devices] == [d["used_bytes"] for d in ref["devices"]]
            assert [d.used_bytes for d in snap.devices] == [4 * 64 * MIB, 4 * 32 * MIB]
        ratio = ratio_gate(
            benchmark,
            native,
            pure_python,
            "region.native_vs_python",
            what="100 regions x 4 live x 2 devices, native vs competent pure Python (pread)",
            n=rounds(200),
            interleave=True,
        )
        whole_file = median_time(lambda: [reference.read_file(p) for p in hundred_files], rounds(20))
        per_file = benchmark.extra_info["baseline_median_s"] / ratio / len(regions)
        benchmark.extra_info["native_per_file_us"] = per_file * 1e6
        benchmark.extra_info["pure_python_per_file_us"] = per_file * ratio * 1e6
        benchmark.extra_info["whole_file_python_per_file_us"] = whole_file / len(regions) * 1e6
        print(
            f"cost per file: native {per_file * 1e6:.1f} us, competent Python {per_file * ratio * 1e6:.1f} us, "
            f"whole-file Python {whole_file / len(regions) * 1e6:.1f} us (not gated)"
        )
    finally:
        for r in regions:
            r.close()
        for c in competent:
            c.close()


def _full_capacity_file(path) -> str:
    """Every one of the 1,024 slots holds a running process; proc_num says how many are live."""
    _container_file(path, 0)
    spec = layouts.V1
    fd = os.open(path, os.O_WRONLY)
    try:
        for i in range(1024):
            os.pwrite(fd, struct.pack("<ii", 1000 + i, 0), spec.slot(i))
            os.pwrite(fd, struct.pack("<i", 1), spec.slot(i) + spec.slot_status)
            os.pwrite(fd, struct.pack("<QQQ", MIB, 0, MIB), spec.used(i, 0) + 16)
    finally:
        os.close(fd)
    return str(path)


def _set_proc_num(path: str, n: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, struct.pack("<i", n), layouts.V1.off_proc_num)
    finally:
        os.close(fd)


def test_cost_follows_live_slots_not_capacity(benchmark, tmp_path):
    few, full = _full_capacity_file(tmp_path / "few.cache"), _full_capacity_file(tmp_path / "full.cache")
    _set_proc_num(few, 4)
    _set_proc_num(full, 1024)
    with Region.open(few) as a, Region.open(full) as b:
        assert a.read().live_procs == 4 and b.read().live_procs == 1024
        # Informational: cost against the number of live slots, same 1,024-slot file.
        table = []
        with Region.open(few) as r:
            for live in (0, 4, 16, 64, 256, 1024):
                _set_proc_num(few, live)
                snap = r.read()
                table.append((live, median_time(r.read, rounds(100)) * 1e6, snap.preads, snap.bytes_read))
        _set_proc_num(few, 4)
        print("\nlive slots -> us per read, preads, bytes read (capacity always 1,024):")
        for live, us, preads, nbytes in table:
            print(f"  {live:5d} -> {us:8.1f} us  {preads:4d} preads  {nbytes:9d} bytes")
        benchmark.extra_info["by_live_slots"] = {str(live): us for live, us, _, _ in table}
        ratio_gate(
            benchmark,
            a.read,
            b.read,
            "region.live_slots",
            what="1,024-slot file: 4 live slots vs 1,024 live slots",
            n=rounds(200),
        )
    # A capacity-bound reader would read everything either way; ours reads a small fraction.
    assert table[1][3] < 0.02 * layouts.V1.file_size
