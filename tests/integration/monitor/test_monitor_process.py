"""The real `vgpu monitor` process: fake NVML, region writer, simulated API server, real HTTP.

Values and labels must match the written regions exactly; containers appear and disappear within
one scan; the feedback writes follow docs/metrics.md §5; hostile files are rejected and counted
while the others keep reporting; a scrape makes no API request (M-9).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import struct
import time

from tests.unit.monitor.helpers import MIB, UUIDS, add_container, container_dir, one, parse, wait_until, write_region
from vgpu.sim.hamicore.writer import RegionWriter

from .conftest import create_pod, set_phase

BOTH = {"main": UUIDS}  # a served vGPU pod whose container has both GPUs (the regions' default)
SCAN_S = 5.0
ONE_SCAN = SCAN_S + 2.0  # one scan period plus slack for a loaded CI machine


def feedback_fields(path):
    with open(path, "rb") as f:
        f.seek(2_008_900)  # v1.x utilization_switch, recent_kernel
        return struct.unpack("<ii", f.read(8))


def test_values_and_labels_match_the_written_regions(apiserver, start_monitor, hook):
    now = int(time.time())
    p1 = create_pod(apiserver, "trainer", namespace="ml", containers=("sidecar", "worker"), gpus={"worker": UUIDS})
    p2 = create_pod(apiserver, "infer", gpus={"main": [UUIDS[1]]})  # no labels at all (M-5)
    add_container(
        hook,
        p1["metadata"]["uid"],
        "worker",
        variant="v1.2",
        procs=[(10, [100, 10]), (11, [200, 20]), (12, [300, 30]), (13, [400, 40])],
        sm_util={(10, 0): 11, (12, 0): 22, (13, 1): 5},
        context_mib={(10, 0): 50},
        now=now - 100,
    )
    add_container(
        hook,
        p2["metadata"]["uid"],
        "main",
        variant="v0",
        uuids=[UUIDS[1]],
        limits_mib=[777],
        procs=[(5, [64])],
        sm_util={(5, 0): 9},
    )
    mon = start_monitor()
    status, body, ctype = mon.get("/metrics")
    assert status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8"
    s = parse(body)
    w = dict(namespace="ml", pod="trainer", container="worker")
    assert one(s, "hami_vgpu_memory_used_bytes", **w, vdevice_index="0", device_uuid=UUIDS[0]) == 1050 * MIB
    assert one(s, "hami_vgpu_memory_used_bytes", **w, vdevice_index="1", device_uuid=UUIDS[1]) == 100 * MIB
    assert one(s, "hami_vgpu_memory_limit_bytes", **w, vdevice_index="0") == 3000 * MIB
    assert one(s, "hami_vgpu_memory_limit_bytes", **w, vdevice_index="1") == 2048 * MIB
    assert one(s, "hami_container_device_utilization_ratio", **w, vdevice_index="0") == 33
    assert one(s, "hami_container_device_utilization_ratio", **w, vdevice_index="1") == 5
    assert one(s, "hami_vgpu_memory_context_bytes", **w, vdevice_index="0") == 50 * MIB
    assert 100 <= one(s, "hami_container_last_kernel_elapsed_seconds", **w, vdevice_index="0") <= 130
    legacy = dict(podnamespace="ml", podname="trainer", ctrname="worker", vdeviceid="0", deviceuuid=UUIDS[0])
    assert (
        one(
            s,
            "Device_memory_desc_of_container",
            **legacy,
            context=str(50 * MIB),
            data=str(1000 * MIB),
            module="0",
            offset="0",
        )
        == 1050 * MIB
    )
    assert 100 <= one(s, "Device_last_kernel_of_container", **legacy) <= 130
    i = dict(namespace="default", pod="infer", container="main", vdevice_index="0", device_uuid=UUIDS[1])
    assert one(s, "hami_vgpu_memory_used_bytes", **i) == 64 * MIB
    assert one(s, "hami_vgpu_memory_limit_bytes", **i) == 777 * MIB
    assert one(s, "hami_container_device_utilization_ratio", **i) == 9
    # the v0 layout has no last_kernel_time: no last-kernel series for it
    assert all(lab["pod"] != "infer" for lab, _ in s["hami_container_last_kernel_elapsed_seconds"])
    assert one(s, "HostGPUMemoryUsage", deviceidx="1", deviceuuid=UUIDS[1]) == 2000 * MIB
    assert one(s, "hami_host_gpu_utilization_ratio", node="node-1", device_index="0") == 40
    assert mon.get("/healthz")[0] == 200
    assert mon.get("/nope")[0] == 404
    assert mon.get("/metrics?x=1")[0] == 200
    assert mon.terminate() == 0


def test_containers_appear_and_disappear_within_one_scan(apiserver, start_monitor, hook):
    mon = start_monitor()
    pod = create_pod(apiserver, "late", gpus=BOTH)
    uid = pod["metadata"]["uid"]

    def present():
        return any(lab["pod"] == "late" for lab, _ in parse(mon.scrape()).get("hami_vgpu_memory_used_bytes", []))

    t0 = time.monotonic()
    add_container(hook, uid, "main", procs=[(1, [5, 0])])
    wait_until(present, ONE_SCAN, "the new container's series")
    appeared = time.monotonic() - t0
    t0 = time.monotonic()
    shutil.rmtree(container_dir(hook, uid, "main"))
    wait_until(lambda: not present(), ONE_SCAN, "the removed container's series to go")
    vanished = time.monotonic() - t0
    print(f"appeared after {appeared:.2f} s, vanished after {vanished:.2f} s (scan period {SCAN_S} s)")


def test_feedback_scenarios_by_the_real_process(apiserver, start_monitor, hook):
    # Priority 0 and 1 on one GPU; two tasks of equal priority on another (docs/metrics.md §5).
    hi = add_container(
        hook,
        create_pod(apiserver, "hi", gpus={"main": [UUIDS[0]]})["metadata"]["uid"],
        "main",
        priority=0,
        uuids=[UUIDS[0]],
        limits_mib=[100],
        procs=[(1, [10])],
    )
    lo = add_container(
        hook,
        create_pod(apiserver, "lo", gpus={"main": [UUIDS[0]]})["metadata"]["uid"],
        "main",
        priority=1,
        uuids=[UUIDS[0]],
        limits_mib=[100],
        procs=[(2, [10])],
    )
    a = add_container(
        hook,
        create_pod(apiserver, "a", gpus={"main": [UUIDS[1]]})["metadata"]["uid"],
        "main",
        priority=1,
        uuids=[UUIDS[1]],
        limits_mib=[100],
        procs=[(3, [10])],
    )
    b = add_container(
        hook,
        create_pod(apiserver, "b", gpus={"main": [UUIDS[1]]})["metadata"]["uid"],
        "main",
        priority=1,
        uuids=[UUIDS[1]],
        limits_mib=[100],
        procs=[(4, [10])],
    )
    before = {p: p.read_bytes() for p in (hi, lo, a, b)}
    start_monitor()  # its first tick runs before it serves
    assert feedback_fields(hi) == (0, 1)  # (utilization_switch, recent_kernel): free, still active
    assert feedback_fields(lo) == (1, -1)  # limited and blocked
    assert feedback_fields(a) == (1, 1)  # equal priority: both limited, none blocked
    assert feedback_fields(b) == (1, 1)
    # next tick (5 s later): the countdown ends, lo is released, a and b are no longer crowded
    wait_until(lambda: feedback_fields(lo) == (0, 0), ONE_SCAN, "the blocked container to be released")
    assert feedback_fields(hi) == (0, 0)
    wait_until(lambda: feedback_fields(a) == (0, 0) and feedback_fields(b) == (0, 0), ONE_SCAN, "switches off")
    for p, old in before.items():  # nothing but those 8 bytes changed
        new = p.read_bytes()
        assert new[:2_008_900] == old[:2_008_900] and new[2_008_908:] == old[2_008_908:]


def test_bad_files_are_rejected_and_counted_while_others_keep_reporting(apiserver, start_monitor, hook, tmp_path):
    good = create_pod(apiserver, "good", gpus=BOTH)
    add_container(hook, good["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    corrupt = container_dir(hook, create_pod(apiserver, "corrupt", gpus=BOTH)["metadata"]["uid"], "main") / "a.cache"
    write_region(corrupt, procs=[(1, [6, 0])])
    with open(corrupt, "r+b") as f:
        f.write(b"\xde\xad\xbe\xef")  # magic overwritten
    outside = write_region(tmp_path / "outside.cache", procs=[(1, [7, 0])])
    outside_bytes = outside.read_bytes()
    linked = container_dir(hook, create_pod(apiserver, "linked", gpus=BOTH)["metadata"]["uid"], "main")
    os.symlink(outside, linked / "a.cache")
    mon = start_monitor()
    s = parse(mon.scrape())
    assert {lab["pod"] for lab, _ in s["hami_vgpu_memory_used_bytes"]} == {"good"}
    for name in ("vgpu_monitor_files_rejected", "vgpu_monitor_files_rejected_total"):
        assert {lab["reason"]: v for lab, v in s[name] if v} == {"magic": 1.0, "symlink": 1.0}  # others at 0
    assert s["vgpu_monitor_files_tracked"] == [({}, 1.0)]
    assert outside.read_bytes() == outside_bytes


def test_terminal_pod_series_disappear_at_the_next_scrape(apiserver, start_monitor, hook):
    pod = create_pod(apiserver, "job", gpus=BOTH)
    add_container(hook, pod["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    mon = start_monitor()
    assert any(lab["pod"] == "job" for lab, _ in parse(mon.scrape())["hami_vgpu_memory_used_bytes"])
    set_phase(apiserver, pod, "Succeeded")
    wait_until(
        lambda: "hami_vgpu_memory_used_bytes" not in parse(mon.scrape()),
        5.0,
        "the terminal pod's series to vanish (watch latency only)",
    )
    assert os.path.isdir(container_dir(hook, pod["metadata"]["uid"], "main"))  # GC waits 300 s


def test_no_api_request_per_scrape_and_p99_below_200ms(apiserver, start_monitor, hook):
    # M-9: 200 containers x 10 scrapes -> zero API requests; p99 scrape < 200 ms on CI hardware.
    for i in range(200):
        pod = create_pod(apiserver, f"p{i}", gpus=BOTH)
        add_container(hook, pod["metadata"]["uid"], "main", procs=[(1, [1, 1]), (2, [2, 2])])
    mon = start_monitor()
    assert len(parse(mon.scrape())["hami_vgpu_memory_used_bytes"]) == 400
    before = apiserver.requests.counts()
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        mon.scrape()
        times.append(time.perf_counter() - t0)
    assert apiserver.requests.counts() == before
    p99 = statistics.quantiles(times, n=100)[98]
    print(f"200 containers: scrape median {statistics.median(times) * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms")
    assert p99 < 0.2


def test_without_nvml_container_metrics_and_feedback_keep_working(apiserver, start_monitor, hook):
    pod = create_pod(apiserver, "p", gpus=BOTH)
    path = add_container(hook, pod["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    mon = start_monitor(nvml_env={"VGPU_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1", "FAIL_ON_INIT_ERROR": "false"})
    s = parse(mon.scrape())
    assert "HostGPUMemoryUsage" not in s and "hami_host_gpu_memory_used_bytes" not in s
    assert s["vgpu_monitor_nvml_up"] == [({}, 0.0)]
    assert one(s, "hami_vgpu_memory_used_bytes", pod="p", vdevice_index="0") == 5 * MIB
    assert feedback_fields(path) == (0, 1)
    assert mon.log().count("NVML is not available") == 1


def test_usage_changes_are_visible_at_the_next_scrape(apiserver, start_monitor, hook):
    pod = create_pod(apiserver, "p", gpus=BOTH)
    path = add_container(hook, pod["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    mon = start_monitor()
    w = RegionWriter.create(path, "v1.2", env={})
    w.attach(2)
    w.add_memory(2, 0, 7 * MIB)
    w.close()
    assert one(parse(mon.scrape()), "hami_vgpu_memory_used_bytes", pod="p", vdevice_index="0") == 12 * MIB


def test_sigterm_stops_cleanly(start_monitor):
    mon = start_monitor()
    mon.proc.send_signal(signal.SIGTERM)
    assert mon.proc.wait(15) == 0
    assert "vgpu monitor stopped" in mon.log()
