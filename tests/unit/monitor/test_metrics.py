"""The exported families, parsed: names, HELP/TYPE, labels and values.

docs/metrics.md §1–§4; failures M-2, M-4, M-5, M-7, M-8, M-10.
"""

from __future__ import annotations

import pathlib
import time

import pytest

from tests.unit.hamicore.scenario import MIB, STANDARD_EXPECTED, VARIANTS, fixture_paths, standard_region
from vgpu.monitor import families as F
from vgpu.monitor.core import Monitor
from vgpu.nvml.errors import NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_UNKNOWN
from vgpu.sim.pods import StaticPods

from .helpers import UUIDS, add_container, container_dir, headers, new_uid, one, parse, pod, wait_until, write_region

NOW = 1_800_000_000  # the standard scenario's timestamps; its last kernel is at NOW + 5


@pytest.fixture
def standard(hook: pathlib.Path) -> tuple[str, pathlib.Path]:
    uid = new_uid()
    path = standard_region(container_dir(hook, uid, "worker") / "9d6a.cache", "v1.2")
    return uid, path


def test_golden_v12_region_both_naming_schemes(make_monitor, standard, clock):
    # M-2: a synthetic v1.2 region, parsed: every container family with exact labels and values.
    uid, _ = standard
    clock.t = NOW + 65
    trainer = pod(uid, "trainer-0", namespace="ml", containers=["sidecar", "worker"], gpus={"worker": UUIDS})
    m = make_monitor(StaticPods([trainer]))
    m.tick()
    body = m.render_metrics()
    s = parse(body)
    exp = {d["index"]: d for d in STANDARD_EXPECTED["devices"]}
    for d, uuid in enumerate(UUIDS):
        leg = dict(
            podnamespace="ml", podname="trainer-0", ctrname="worker", vdeviceid=str(d), deviceuuid=uuid, zone="vGPU"
        )
        ham = dict(
            namespace="ml", pod="trainer-0", container="worker", vdevice_index=str(d), device_uuid=uuid, zone="vGPU"
        )
        e = exp[d]
        assert one(s, "vGPU_device_memory_usage_in_bytes", **leg) == e["used_bytes"]
        assert one(s, "vGPU_device_memory_limit_in_bytes", **leg) == e["limit_bytes"]
        assert (
            one(
                s,
                "Device_memory_desc_of_container",
                **leg,
                context=str(e["context_bytes"]),
                module="0",
                data=str(e["data_bytes"]),
                offset="0",
            )
            == e["used_bytes"]
        )
        assert one(s, "Device_utilization_desc_of_container", **leg) == e["sm_util"]
        assert one(s, "Device_last_kernel_of_container", **leg) == 60
        assert one(s, "hami_vgpu_memory_used_bytes", **ham) == e["used_bytes"]
        assert one(s, "hami_vgpu_memory_limit_bytes", **ham) == e["limit_bytes"]
        assert one(s, "hami_container_device_memory_bytes", **ham) == e["used_bytes"]
        assert one(s, "hami_container_device_utilization_ratio", **ham) == e["sm_util"]
        assert one(s, "hami_container_last_kernel_elapsed_seconds", **ham) == 60
        assert one(s, "hami_vgpu_memory_context_bytes", **ham) == e["context_bytes"]
        assert one(s, "hami_vgpu_memory_module_bytes", **ham) == 0
        assert one(s, "hami_vgpu_memory_buffer_bytes", **ham) == e["data_bytes"]
    # M-4: pid 103 exited normally (pid 0): its 777 MiB on d0 are not in the sum
    assert exp[0]["used_bytes"] == 1874 * MIB
    hdr = headers(body)
    for fam in F.LEGACY_CONTAINER + F.HAMI_CONTAINER:
        assert hdr[fam.name] == (fam.type, fam.help)
        for labels, _ in s[fam.name]:
            assert set(labels) == set(fam.labels) | {"zone"}, fam.name
    assert hdr["Device_memory_desc_of_container"] == ("counter", "Container device meory description")
    assert "Device_memory_desc_of_container_total" not in body.decode()


def test_every_zone_sample_and_exact_exposition_format(make_monitor, standard, host_source):
    m = make_monitor(StaticPods([]), host=host_source)
    m.tick()
    body = m.render_metrics().decode()
    names = {f.name for f in F.ALL}
    n = 0
    for line in body.splitlines():
        if line and not line.startswith("#") and line.split("{")[0] in names:
            assert line.count('zone="vGPU"') == 1, line
            n += 1
    assert n > 30


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_layout_reports_correct_values(make_monitor, hook, clock, variant):
    # M-10: one synthetic file per layout -> correct values; util/last-kernel only where the layout has them.
    uid = new_uid()
    standard_region(container_dir(hook, uid, "main") / "r.cache", variant)
    clock.t = NOW + 15
    m = make_monitor(StaticPods([pod(uid, "p", gpus={"main": UUIDS})]))
    m.scan()
    s = parse(m.render_metrics())
    assert sorted(v for _, v in s["hami_vgpu_memory_used_bytes"]) == [567 * MIB, 1874 * MIB]
    assert sorted(v for _, v in s["vGPU_device_memory_limit_in_bytes"]) == [2048 * MIB, 3000 * MIB]
    has_util = variant != "original"
    has_last_kernel = variant in ("v1.1", "v1.2", "interim")
    assert ("Device_utilization_desc_of_container" in s) == has_util
    assert ("hami_container_device_utilization_ratio" in s) == has_util
    if has_util:
        assert sorted(v for _, v in s["hami_container_device_utilization_ratio"]) == [7, 35]
    assert ("Device_last_kernel_of_container" in s) == has_last_kernel
    assert ("hami_container_last_kernel_elapsed_seconds" in s) == has_last_kernel
    if has_last_kernel:
        assert {v for _, v in s["Device_last_kernel_of_container"]} == {10}


def test_last_kernel_age_is_never_negative_and_absent_when_zero(make_monitor, hook, clock):
    future = add_container(hook, new_uid(), "main", procs=[(1, [1, 0])], now=int(clock()) + 1000)
    assert future
    zero = add_container(hook, new_uid(), "main", procs=[(1, [1, 0])], now=0)
    assert zero
    m = make_monitor()
    m.scan()
    s = parse(m.render_metrics())
    assert [v for _, v in s["Device_last_kernel_of_container"]] == [0, 0]  # only the future one, clamped


def test_real_hami_core_fixture(make_monitor, hook, tmp_path, clock):
    # The bytes HAMi-core itself wrote (tests/fixtures/hami-core): 1,924 / 572 MiB, limits 3000 MiB / 2 GiB.
    uid = new_uid()
    files = fixture_paths(tmp_path)
    d = container_dir(hook, uid, "main")
    (d / "f.cache").write_bytes(files["v1.2-four-processes.cache.gz"].read_bytes())
    real = ("GPU-8664316c-6888-5063-1e4d-f2a09cfbf180", "GPU-8664316c-6888-5063-1e4d-f2a09cfbf181")
    m = make_monitor(StaticPods([pod(uid, "real", gpus={"main": real})]))
    m.scan()
    s = parse(m.render_metrics())
    got = {lab["device_uuid"]: v for lab, v in s["hami_vgpu_memory_used_bytes"]}
    assert got == {
        "GPU-8664316c-6888-5063-1e4d-f2a09cfbf180": 1924 * MIB,
        "GPU-8664316c-6888-5063-1e4d-f2a09cfbf181": 572 * MIB,
    }
    assert sorted(v for _, v in s["hami_vgpu_memory_limit_bytes"]) == [2147483648, 3145728000]


def test_pod_without_any_hami_label_is_mapped(make_monitor, hook):
    # M-5: the mapping is by UID from the node's pod list, no scheduler-specific label needed.
    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [3, 0])])
    m = make_monitor(StaticPods([pod(uid, "plain", namespace="team-a", labels={"app": "x"}, gpus={"main": UUIDS})]))
    m.scan()
    s = parse(m.render_metrics())
    assert {(lab["namespace"], lab["pod"], lab["container"]) for lab, _ in s["hami_vgpu_memory_used_bytes"]} == {
        ("team-a", "plain", "main")
    }
    assert s["vgpu_monitor_unmapped_containers"] == [({}, 0.0)]


def test_unknown_pod_is_exported_by_uid_and_an_unassigned_container_not_at_all(make_monitor, hook):
    # docs/metrics.md §4.3, §5.1: a pod the watch does not know yet cannot be checked (exported by
    # UID); a known pod decides what its containers may report, and it gives none to these two.
    unknown, known = new_uid(), new_uid()
    add_container(hook, unknown, "main", procs=[(1, [3, 0])])
    add_container(hook, known, "ghost", procs=[(1, [4, 0])])  # not in the pod's spec
    add_container(hook, known, "side", procs=[(1, [5, 0])])  # in the spec, but requests no vGPU
    m = make_monitor(StaticPods([pod(known, "real", containers=["main", "side"], gpus={"main": UUIDS})]))
    m.tick()
    s = parse(m.render_metrics())
    rows = {(lab["podnamespace"], lab["podname"], lab["ctrname"]) for lab, _ in s["vGPU_device_memory_usage_in_bytes"]}
    assert rows == {("", unknown, "main")}
    rows = {(lab["namespace"], lab["pod"], lab["container"]) for lab, _ in s["hami_vgpu_memory_used_bytes"]}
    assert rows == {("", unknown, "main")}
    assert s["vgpu_monitor_unmapped_containers"] == [({}, 1.0)]
    mismatches = {lab["reason"]: v for lab, v in s["vgpu_monitor_region_mismatches_total"]}
    assert mismatches == {"unassigned_gpu": 2.0, "priority": 0.0}


def test_pod_arriving_later_relabels_the_series(make_monitor, hook):
    uid = new_uid()
    add_container(hook, uid, "main", procs=[(1, [3, 0])])
    pods = StaticPods([])
    m = make_monitor(pods)
    m.scan()
    assert {lab["pod"] for lab, _ in parse(m.render_metrics())["hami_vgpu_memory_used_bytes"]} == {uid}
    pods.apply("ADDED", pod(uid, "late", gpus={"main": UUIDS}))
    assert {lab["pod"] for lab, _ in parse(m.render_metrics())["hami_vgpu_memory_used_bytes"]} == {"late"}


def test_legacy_uuid_is_cut_at_40_bytes_and_labels_are_escaped(make_monitor, hook):
    long_uuid = "GPU-" + "a" * 40 + '"x\\y'
    uid = new_uid()
    add_container(hook, uid, "main", uuids=[long_uuid], limits_mib=[10], procs=[(1, [1])])
    m = make_monitor()
    m.scan()
    s = parse(m.render_metrics())
    assert s["vGPU_device_memory_usage_in_bytes"][0][0]["deviceuuid"] == long_uuid[:40]
    assert s["hami_vgpu_memory_used_bytes"][0][0]["device_uuid"] == long_uuid


def test_flags_turn_each_naming_scheme_off(make_monitor, hook, host_source):
    add_container(hook, new_uid(), "main", procs=[(1, [1, 0])])
    only_hami = parse(_scrape(make_monitor(host=host_source, legacy=False)))
    assert not any(name in only_hami for name in (f.name for f in F.LEGACY_HOST + F.LEGACY_CONTAINER))
    assert all(f.name in only_hami for f in F.HAMI_HOST + F.HAMI_CONTAINER)
    only_legacy = parse(_scrape(make_monitor(host=host_source, hami=False)))
    assert not any(name.startswith("hami_") for name in only_legacy)
    assert all(f.name in only_legacy for f in F.LEGACY_HOST + F.LEGACY_CONTAINER)
    neither = parse(_scrape(make_monitor(host=host_source, hami=False, legacy=False)))
    assert all(name.startswith("vgpu_monitor_") for name in neither)


def _scrape(m: Monitor) -> bytes:
    m.scan()
    return m.render_metrics()


def test_host_families_label_sets_and_values(make_monitor, host_source):
    # M-8: HAMi v2.10 exactly: `node` on two families, none on the memory-controller one; legacy has none.
    m = make_monitor(host=host_source)
    body = m.render_metrics()
    s = parse(body)
    hdr = headers(body)
    for fam in F.LEGACY_HOST + F.HAMI_HOST:
        assert hdr[fam.name] == (fam.type, fam.help)
        assert [set(lab) for lab, _ in s[fam.name]] == [set(fam.labels) | {"zone"}] * 2
    t = "NVIDIA-NVIDIA A100-SXM4-80GB"
    assert one(s, "HostGPUMemoryUsage", deviceidx="1", deviceuuid=UUIDS[1]) == 4321 * MIB
    assert one(s, "HostCoreUtilization", deviceidx="0", deviceuuid=UUIDS[0]) == 37
    assert (
        one(s, "hami_host_gpu_memory_used_bytes", node="node-1", device_index="0", device_uuid=UUIDS[0], device_type=t)
        == 1234 * MIB
    )
    assert one(s, "hami_host_gpu_utilization_ratio", node="node-1", device_index="1", device_type=t) == 73
    assert one(s, "hami_host_gpu_memory_controller_utilization_ratio", device_index="1", device_type=t) == 22
    assert s["vgpu_monitor_nvml_up"] == [({}, 1.0)]
    assert s["vgpu_monitor_nvml_sample_age_seconds"][0][1] < 5


def test_host_values_follow_nvml_without_reinit(make_monitor, host_source, nvml_two_gpus):
    m = make_monitor(host=host_source)
    assert one(parse(m.render_metrics()), "HostCoreUtilization", deviceidx="0") == 37
    nvml_two_gpus.update_device(0, utilization_gpu=88)
    assert one(parse(m.render_metrics()), "HostCoreUtilization", deviceidx="0") == 88


def test_not_supported_utilization_on_one_gpu_omits_only_that(make_monitor, hook, host_source, nvml_two_gpus):
    # M-7: NOT_SUPPORTED for utilization on GPU 1 -> GPU 0 series and all container series are still there.
    add_container(hook, new_uid(), "main", procs=[(1, [3, 4])])
    nvml_two_gpus.inject_error("nvmlDeviceGetUtilizationRates", NVML_ERROR_NOT_SUPPORTED, index=1)
    m = make_monitor(host=host_source)
    m.scan()
    s = parse(m.render_metrics())
    assert [lab["deviceidx"] for lab, _ in s["HostCoreUtilization"]] == ["0"]
    assert [lab["device_index"] for lab, _ in s["hami_host_gpu_utilization_ratio"]] == ["0"]
    assert [lab["device_index"] for lab, _ in s["hami_host_gpu_memory_controller_utilization_ratio"]] == ["0"]
    assert sorted(lab["deviceidx"] for lab, _ in s["HostGPUMemoryUsage"]) == ["0", "1"]  # memory still works
    assert len(s["hami_vgpu_memory_used_bytes"]) == 2
    s = parse(m.render_metrics())
    # 19.5: NOT_SUPPORTED is an answer, not an error (docs/metrics.md §4.1).
    assert s.get("vgpu_monitor_nvml_errors_total", []) == []
    assert s["vgpu_monitor_nvml_unsupported"] == [
        ({"device_index": "0", "call": "memory"}, 0.0),
        ({"device_index": "0", "call": "utilization"}, 0.0),
        ({"device_index": "1", "call": "memory"}, 0.0),
        ({"device_index": "1", "call": "utilization"}, 1.0),
    ]
    nvml_two_gpus.clear_error("nvmlDeviceGetUtilizationRates", index=1)
    wait_until(
        lambda: "1" in [lab["deviceidx"] for lab, _ in parse(m.render_metrics())["HostCoreUtilization"]], 5, "util back"
    )
    unsupported = parse(m.render_metrics())["vgpu_monitor_nvml_unsupported"]
    assert all(v == 0 for _, v in unsupported)


def test_other_nvml_errors_are_still_counted(make_monitor, host_source, nvml_two_gpus):
    nvml_two_gpus.inject_error("nvmlDeviceGetMemoryInfo", NVML_ERROR_UNKNOWN, index=0)
    m = make_monitor(host=host_source)
    errors = parse(m.render_metrics())["vgpu_monitor_nvml_errors_total"]
    assert [(lab, v >= 1) for lab, v in errors] == [
        ({"device_index": "0", "call": "memory", "code": "NVML_ERROR_UNKNOWN"}, True)
    ]


def test_labelled_self_counters_are_present_at_zero_from_the_start(make_monitor):
    s = parse(make_monitor(host=None).render_metrics())
    reasons = {lab["reason"] for lab, v in s["vgpu_monitor_files_rejected_total"] if v == 0}
    assert {"dir_symlink", "not_directory", "dir_open", "symlink", "not_regular", "size", "magic"} <= reasons
    assert {"version", "short_read", "io", "open", "race", "layout_changed", "name"} <= reasons
    assert {lab["reason"] for lab, _ in s["vgpu_monitor_files_rejected"]} == reasons
    read = {lab["reason"] for lab, v in s["vgpu_monitor_region_read_errors_total"] if v == 0}
    assert {"size", "magic", "version", "short_read", "io", "torn", "layout_changed"} <= read
    assert s["vgpu_monitor_feedback_writes_total"] == [
        ({"field": "recent_kernel"}, 0.0),
        ({"field": "utilization_switch"}, 0.0),
    ]


def test_without_nvml_host_families_are_omitted_and_containers_still_work(make_monitor, hook):
    add_container(hook, new_uid(), "main", procs=[(1, [3, 0])])
    m = make_monitor(host=None)
    m.scan()
    s = parse(m.render_metrics())
    assert not any(f.name in s for f in F.LEGACY_HOST + F.HAMI_HOST)
    assert "hami_vgpu_memory_used_bytes" in s
    assert s["vgpu_monitor_nvml_up"] == [({}, 0.0)]


def test_scrape_does_not_write_any_file(make_monitor, hook):
    path = add_container(hook, new_uid(), "main", procs=[(1, [3, 0])])
    m = make_monitor()
    m.scan()
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    for _ in range(3):
        m.render_metrics()
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_family_with_no_samples_is_omitted(make_monitor, hook):
    write_region(container_dir(hook, new_uid(), "main") / "o.cache", variant="original", procs=[(1, [1, 0])])
    m = make_monitor()
    m.scan()
    body = m.render_metrics().decode()
    assert "Device_utilization_desc_of_container" not in body  # no HELP/TYPE without samples
    assert "hami_container_last_kernel_elapsed_seconds" not in body


def test_scrape_time_is_recorded(make_monitor):
    m = make_monitor()
    t0 = time.perf_counter()
    m.render_metrics()
    elapsed = time.perf_counter() - t0
    s = parse(m.render_metrics())
    assert s["vgpu_monitor_scrapes_total"] == [({}, 1.0)]
    assert 0 < s["vgpu_monitor_scrape_duration_seconds_sum"][0][1] <= elapsed
