"""``Region.read`` reuses the snapshot of a byte-identical native summary, and only then."""

from __future__ import annotations

from tests.unit.hamicore.scenario import MIB
from vgpu.hamicore.region import Region
from vgpu.sim.hamicore.writer import RegionWriter

UUIDS = ["GPU-11111111-2222-3333-4444-555555555555"]


def _writer(path) -> RegionWriter:
    w = RegionWriter.create(path, "v1.2", env={"CUDA_DEVICE_MEMORY_LIMIT_0": "3000m"})
    w.init_devices(UUIDS)
    w.attach(1)
    w.add_memory(1, 0, 64 * MIB)
    return w


def test_an_unchanged_file_reuses_its_snapshot(tmp_path):
    with _writer(tmp_path / "r.cache"), Region.open(tmp_path / "r.cache") as region:
        region.read()  # the first read fstats (its summary counts that); the next ones do not
        second = region.read()
        assert region.read() is second
        assert second.devices[0].used_bytes == 64 * MIB


def test_every_change_a_writer_makes_is_seen_on_the_next_read(tmp_path):
    with _writer(tmp_path / "r.cache") as w, Region.open(tmp_path / "r.cache") as region:
        region.read()
        before = region.read()
        assert before.devices[0].used_bytes == 64 * MIB
        w.add_memory(1, 0, MIB)
        after = region.read()
        assert after is not before and after.devices[0].used_bytes == 65 * MIB
        w.attach(2)
        w.add_memory(2, 0, 2 * MIB)
        third = region.read()
        assert third.live_procs == 2 and third.devices[0].used_bytes == 67 * MIB and third.devices[0].procs == 2
        w.detach(2)
        assert region.read().devices[0].used_bytes == 65 * MIB
        w.free_memory(1, 0, MIB)
        assert region.read().devices[0].used_bytes == 64 * MIB


def test_two_regions_on_equal_bytes_keep_their_own_path(tmp_path):
    with _writer(tmp_path / "a.cache"), _writer(tmp_path / "b.cache"):
        with Region.open(tmp_path / "a.cache") as a, Region.open(tmp_path / "b.cache") as b:
            assert a.read().path.endswith("a.cache") and b.read().path.endswith("b.cache")
