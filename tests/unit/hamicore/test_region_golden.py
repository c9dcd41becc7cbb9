"""Golden decoding: HAMi-core's own files and writer-made files for every layout."""

from __future__ import annotations

import gzip

import pytest

from tests.unit.hamicore import scenario
from tests.unit.hamicore.scenario import GIB, MIB, NOW, STANDARD_EXPECTED, assert_same
from vgpu.hamicore.layouts import MAGIC, Layout
from vgpu.hamicore.region import Region, read_region
from vgpu.sim.hamicore import reference
from vgpu.sim.hamicore.writer import RegionWriter

EXPECTED = scenario.fixture_expected()


# ---- the real files written by HAMi-core (tests/fixtures/hami-core) ---------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_hami_core_file_header_decodes_to_expected(real_fixtures, name):
    exp = EXPECTED[name]
    snap = read_region(real_fixtures[name])
    assert snap.file_size == exp["file_size"]
    assert snap.layout is Layout.V1 and snap.layout_name == "v1.2"
    assert (snap.major_version, snap.minor_version) == (exp["major_version"], exp["minor_version"])
    assert snap.seqlocked
    assert snap.device_num == exp["device_num"]
    assert [d.uuid for d in snap.devices] == exp["uuids"]
    assert list(snap.limits[:2]) == exp["limit_bytes_first2"]
    assert list(snap.sm_limits[:2]) == exp["sm_limit_first2"]
    assert snap.proc_num == exp["proc_num"]
    assert snap.utilization_switch == exp["utilization_switch"]
    assert snap.recent_kernel == exp["recent_kernel"]
    assert snap.priority == exp["priority"]
    assert snap.last_kernel_time == exp["last_kernel_time"]
    assert snap.anomalies == () and snap.skipped_slots == 0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_hami_core_file_slots_decode_to_expected(real_fixtures, name):
    exp = EXPECTED[name]
    with Region.open(real_fixtures[name]) as region:
        assert region.read().proc_num == len(exp["slots"])
        slots = [region.read_slot(i) for i in range(len(exp["slots"]))]  # all 16 devices
    for got, want in zip(slots, exp["slots"], strict=True):
        assert (got.pid, got.hostpid, got.status, got.seqlock) == (
            want["pid"],
            want["hostpid"],
            want["status"],
            want["seqlock"],
        )
        assert got.consistent and got.in_use == (want["pid"] != 0 and want["status"] != 0)
        for d, wd in enumerate(want["devices"]):
            gd = got.devices[d]
            assert (
                gd.context_bytes,
                gd.module_bytes,
                gd.data_bytes,
                gd.offset_bytes,
                gd.total_bytes,
                gd.monitor_used_bytes,
                gd.sm_util,
            ) == (
                wd["context_size"],
                wd["module_size"],
                wd["data_size"],
                wd["offset"],
                wd["total"],
                wd["monitorused"],
                wd["sm_util"],
            )


def test_real_empty_file_reports_unlimited_sm_and_no_processes(real_fixtures):
    snap = read_region(real_fixtures["v1.2-empty.cache.gz"])
    assert snap.limits == (4 * GIB,) * 16
    assert snap.sm_limits == (100,) * 16
    assert snap.live_procs == 0 and snap.devices == ()
    assert snap.priority == 1


def test_real_four_processes_file_aggregates(real_fixtures):
    snap = read_region(real_fixtures["v1.2-four-processes.cache.gz"])
    assert snap.live_procs == 4
    d0, d1 = snap.devices
    assert (d0.limit_bytes, d1.limit_bytes) == (3_145_728_000, 2_147_483_648)
    assert (d0.sm_limit, d1.sm_limit) == (50, 50)
    assert d0.used_bytes == 1924 * MIB and d1.used_bytes == 572 * MIB
    assert d0.context_bytes == 300 * MIB and d0.data_bytes == 1624 * MIB
    assert d0.monitor_used_bytes == 1400 * MIB and d0.sm_util == 37
    assert (d0.procs, d1.procs) == (4, 4)


def test_real_after_exit_file_excludes_the_cleared_slot_only(real_fixtures):
    snap = read_region(real_fixtures["v1.2-after-exit.cache.gz"])
    assert snap.proc_num == 4 and snap.live_procs == 3
    d0, d1 = snap.devices
    # 1,324 + 512 MiB of the normally exited process are gone; the three _exit()ed slots still count.
    assert d0.used_bytes == 600 * MIB and d1.used_bytes == 60 * MIB
    assert d0.context_bytes == 0 and d0.monitor_used_bytes == 0 and d0.sm_util == 0


def test_reference_decoder_agrees_on_real_files(real_fixtures):
    for path in real_fixtures.values():
        assert_same(read_region(path), reference.read_file(path))


# ---- the writer reproduces HAMi-core byte for byte ---------------------------------------------


def _replay_fixture(path, *, after_exit: bool) -> bytes:
    """Drive the writer through the same calls HAMi-core's driver made (fixtures README)."""
    now = EXPECTED["v1.2-four-processes.cache.gz"]["last_kernel_time"]
    env = {
        "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "2g",
        "CUDA_DEVICE_SM_LIMIT": "50",
        "CUDA_TASK_PRIORITY": "0",
    }
    with RegionWriter.create(path, "v1.2", env=env, now=now) as w:
        w.init_devices([u for u in EXPECTED["v1.2-four-processes.cache.gz"]["uuids"]])
        for slot in EXPECTED["v1.2-four-processes.cache.gz"]["slots"]:
            pid = slot["pid"]
            w.attach(pid, now=now)
            for d, dev in enumerate(slot["devices"]):
                if dev["context_size"]:
                    w.add_memory(pid, d, dev["context_size"], "context")
            for d, dev in enumerate(slot["devices"]):
                w.add_memory(pid, d, dev["data_size"], "data")
            if slot["hostpid"]:
                w.set_hostpid(pid, slot["hostpid"])
            for d, dev in enumerate(slot["devices"]):
                if dev["monitorused"] or dev["sm_util"]:
                    w.set_monitor(pid, d, monitor_used=dev["monitorused"], sm_util=dev["sm_util"])
        if after_exit:
            w.detach(9396)
    return path.read_bytes()


def test_writer_reproduces_the_real_empty_file_byte_for_byte(tmp_path, real_fixtures):
    now = EXPECTED["v1.2-empty.cache.gz"]["last_kernel_time"]
    path = tmp_path / "empty.cache"
    with RegionWriter.create(
        path, "v1.2", env={"CUDA_DEVICE_MEMORY_LIMIT": "4g", "CUDA_DEVICE_SM_LIMIT": "0"}, now=now
    ) as w:
        w.attach(4242, now=now)  # shrreg_tool's own process, which then exits normally
        w.detach(4242)
    assert path.read_bytes() == real_fixtures["v1.2-empty.cache.gz"].read_bytes()


@pytest.mark.parametrize(
    "after_exit,name", [(False, "v1.2-four-processes.cache.gz"), (True, "v1.2-after-exit.cache.gz")]
)
def test_writer_reproduces_the_real_process_files_byte_for_byte(tmp_path, real_fixtures, after_exit, name):
    ours = _replay_fixture(tmp_path / "r.cache", after_exit=after_exit)
    assert ours == real_fixtures[name].read_bytes()


def test_writer_creates_files_as_hami_core_does(tmp_path):
    path = tmp_path / "new.cache"
    old = __import__("os").umask(0o077)
    try:
        RegionWriter.create(path, "v1.2", env={}).close()
    finally:
        __import__("os").umask(old)
    st = path.stat()
    assert st.st_size == 2_008_953
    assert st.st_mode & 0o777 == 0o666  # umask(0) + 0666: any user in the container may attach
    data = path.read_bytes()
    assert int.from_bytes(data[0:4], "little") == MAGIC
    assert data[-1] == 0
    snap = read_region(path)
    assert snap.limits == (0,) * 16 and snap.sm_limits == (100,) * 16  # unset = unlimited
    assert (snap.utilization_switch, snap.recent_kernel, snap.priority, snap.proc_num) == (1, 2, 1, 0)


def test_existing_file_keeps_its_limits(tmp_path):
    path = tmp_path / "r.cache"
    RegionWriter.create(path, "v1.2", env={"CUDA_DEVICE_MEMORY_LIMIT_0": "100m"}).close()
    second = RegionWriter.create(path, "v1.2", env={"CUDA_DEVICE_MEMORY_LIMIT_0": "200m"})
    second.close()
    assert second.limit_inconsistency
    assert read_region(path).limits[0] == 100 * MIB


# ---- writer-made files, every layout ------------------------------------------------------------


@pytest.mark.parametrize("variant", scenario.VARIANTS)
def test_writer_files_decode_to_the_expected_numbers(tmp_path, variant):
    path = scenario.standard_region(tmp_path / f"{variant}.cache", variant)
    snap = read_region(path)
    size = {"original": 804_681, "v0": 1_197_897, "v1.1": 2_008_953, "v1.2": 2_008_953, "interim": 2_008_985}
    assert snap.file_size == size[variant] == path.stat().st_size
    assert snap.layout_name == variant
    assert snap.version == {"v1.1": "1.1", "v1.2": "1.2", "interim": "1.1"}.get(variant)
    assert snap.seqlocked == (variant in ("v1.2", "interim"))
    assert snap.proc_num == STANDARD_EXPECTED["proc_num"]
    assert snap.live_procs == STANDARD_EXPECTED["live_procs"]
    assert snap.priority == STANDARD_EXPECTED["priority"]
    assert snap.limits == STANDARD_EXPECTED["limits"]
    assert snap.sm_limits == STANDARD_EXPECTED["sm_limits"]
    assert (snap.utilization_switch, snap.recent_kernel) == (1, 2)
    assert snap.last_kernel_time == (None if variant in ("original", "v0") else NOW + 5)
    want = [dict(d) for d in STANDARD_EXPECTED["devices"]]
    if variant == "original":
        for d in want:
            d["sm_util"] = 0
    assert [d.as_dict() for d in snap.devices] == want
    assert snap.anomalies == ()
    assert_same(snap, reference.read_file(path))


@pytest.mark.parametrize("variant", scenario.VARIANTS)
def test_compaction_on_attach_drops_exited_and_killed_slots(tmp_path, variant):
    path = scenario.standard_region(tmp_path / "r.cache", variant)
    with RegionWriter.create(path, variant, env=scenario.ENV) as w:
        w.kill(104)  # this writer instance is the one that knows 104 is gone
        w.attach(106)
        w.add_memory(106, 0, 1 * MIB)
    snap = read_region(path)
    # 103 (exited) and 104 (killed) were compacted away; 101, 102, 105 and 106 remain.
    assert snap.proc_num == 4 and snap.live_procs == 4
    assert snap.devices[0].used_bytes == (100 + 1324 + 50 + 1) * MIB
    with Region.open(path) as region:
        assert sorted(s.pid for s in region.slots()) == [101, 102, 105, 106]


@pytest.mark.parametrize("variant", scenario.VARIANTS)
def test_uninitialised_devices_are_skipped(tmp_path, variant):
    path = tmp_path / "r.cache"
    with RegionWriter.create(path, variant, env={"CUDA_DEVICE_MEMORY_LIMIT": "1g"}) as w:
        w.attach(7)
        w.add_memory(7, 0, MIB)
    snap = read_region(path)
    assert snap.device_num == 0 and snap.devices == () and snap.live_procs == 1


def test_fixture_files_are_really_gzip_of_the_decoded_files(real_fixtures):
    for name, path in real_fixtures.items():
        assert gzip.decompress((scenario.FIXTURES / name).read_bytes()) == path.read_bytes()
