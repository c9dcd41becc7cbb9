"""The region reader against its physical floor (benchmarks/floors/region_floor.c).

100 container files (v1.2, 4 live processes x 2 devices), descriptors kept open as the monitor
keeps them.  Ours: ``Region.read()`` on each, a full :class:`~vgpu.hamicore.region.RegionSnapshot`
per file (files unchanged between reads, as most are from one scrape to the next, reuse their
snapshot; the cost when every file changed is reported beside it).  Floor: a C loop making the
same four reads per file (tail, header + seqlock words, live slots, seqlock words) and summing
used memory per device.  Timed call by call in turn; gate
``region.floor`` holds ours within 2x of the floor.  The competent-Python baseline is
benchmarks/test_region_reader.py.
"""

from __future__ import annotations

import ctypes

import pytest

from benchmarks import floors
from benchmarks.conftest import assert_gates, interleaved_medians, record_gate, rounds
from benchmarks.test_region_reader import _container_file
from vgpu.hamicore.region import Region
from vgpu.sim.hamicore.scenario import MIB

FILES = 100


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[str]:
    base = tmp_path_factory.mktemp("floor-regions")
    return [_container_file(base / f"{k:03d}.cache", 4) for k in range(FILES)]


def test_region_read_within_2x_of_its_pread_floor(benchmark, files):
    lib = floors.load()
    regions = [Region.open(p) for p in files]
    try:
        fds = (ctypes.c_int * FILES)(*(r.fileno() for r in regions))
        sums = (ctypes.c_uint64 * (16 * FILES))()

        def ours():
            return [r.read() for r in regions]

        def ours_changed():  # every file as if written since the last read: the snapshot is rebuilt
            out = []
            for r in regions:
                r._raw = b""
                out.append(r.read())
            return out

        def floor():
            assert lib.region_floor_read(fds, FILES, sums) == FILES

        floor()
        snaps = ours()
        for f, snap in enumerate(snaps):  # the same answer: the floor is a correct reader
            assert (
                [d.used_bytes for d in snap.devices] == list(sums[16 * f : 16 * f + 2]) == [4 * 64 * MIB, 4 * 32 * MIB]
            )
            assert snap.preads == 4
        n = rounds(300)
        ours_s, floor_s = interleaved_medians(ours, floor, n)
        changed_s, floor_c = interleaved_medians(ours_changed, floor, rounds(100))
        benchmark.pedantic(ours, rounds=5, iterations=1)
        benchmark.extra_info.update(
            {
                "ours_per_file_us": ours_s / FILES * 1e6,
                "floor_per_file_us": floor_s / FILES * 1e6,
                "ours_changed_per_file_us": changed_s / FILES * 1e6,
                "changed_vs_floor": changed_s / floor_c,
            }
        )
        print(
            f"\nregion read per file: ours {ours_s / FILES * 1e6:.2f} us, floor {floor_s / FILES * 1e6:.2f} us; "
            f"every file changed since the last read: ours {changed_s / FILES * 1e6:.2f} us "
            f"({changed_s / floor_c:.2f}x the floor)"
        )
        r = record_gate(
            "region.floor",
            floor_s / ours_s,
            ours_median_s=ours_s,
            baseline_median_s=floor_s,
            rounds=n,
            interleaved=True,
        )
        assert_gates(r)
    finally:
        for r in regions:
            r.close()
