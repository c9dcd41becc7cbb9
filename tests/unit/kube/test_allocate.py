"""VolcanoAllocator (docs/protocol.md §5) in process, against the simulated API server over HTTP."""

from __future__ import annotations

import os
import random

import pytest

from vgpu.kube import events as ev
from vgpu.plugin.allocator import ERR_INIT, ERR_MULTIPLE, ERR_NO_POD, VolcanoAllocator
from vgpu.plugin.api import pb
from vgpu.plugin.devices import ResourceKind
from vgpu.plugin.responses import AllocationError
from vgpu.protocol import ContainerDevice, MigSlot, encode_pod_devices, keys, scheduler_allocation

from .conftest import CORES, MEMORY, NODE, NUMBER, UUIDS, dev, gpu, make_config

N, M, C = ResourceKind.NUMBER, ResourceKind.MEMORY, ResourceKind.CORES


def envs(resp: pb.ContainerAllocateResponse) -> dict[str, str]:
    return dict(resp.envs)


def mounts(resp: pb.ContainerAllocateResponse) -> dict[str, tuple[str, bool]]:
    return {m.container_path: (m.host_path, m.read_only) for m in resp.mounts}


def assert_failed(sim, name: str, message_part: str) -> None:
    ann = sim.annotations(name)
    assert ann[keys.BIND_PHASE] == "failed"
    assert ann[keys.VGPU_TIME] == keys.VGPU_TIME_DONE
    msgs = [e["message"] for e in sim.events(ev.REASON_ALLOCATION_FAILED) if e["involvedObject"]["name"] == name]
    assert any(message_part in m for m in msgs), msgs
    assert "hamivgpu" not in sim.node_annotations()


def test_worked_example_section_6(sim):
    """docs/protocol.md §6: side (no GPU), c1 (2 GPUs 3000/30), c2 (1 GPU 2000): segment k → k-th vGPU container."""
    ctrs = [
        {"name": "side", "env": {"CUDA_DISABLE_CONTROL": "true"}},
        {"name": "c1", "limits": {NUMBER: 2, MEMORY: 3000, CORES: 30}},
        {"name": "c2", "limits": {NUMBER: 1, MEMORY: 2000}},
    ]
    sim.schedule("p", ctrs, [[dev(1, 3000, 30), dev(0, 3000, 30)], [dev(1, 2000, 0)]], lock=True)
    uid = sim.uid("p")
    # c1: the kubelet asks for a preference, then calls the three resources in any order.
    pref = sim.preferred(2)
    assert sorted(pref) == sorted(sim.number_ids(0, 1))
    assert envs(sim.allocate(M, sim.memory_ids(3000))) == {}
    r = sim.allocate(N, pref)
    assert envs(sim.allocate(C, [f"{UUIDS[0]}-core-{i}" for i in range(30)])) == {}
    e = envs(r)
    assert e["NVIDIA_VISIBLE_DEVICES"] == f"{UUIDS[0]},{UUIDS[1]}"  # PCI order, not segment order
    assert (e["CUDA_DEVICE_MEMORY_LIMIT_0"], e["CUDA_DEVICE_MEMORY_LIMIT_1"]) == ("3000m", "3000m")
    assert (e["CUDA_DEVICE_SM_LIMIT"], e["CUDA_DEVICE_SM_LIMIT_0"], e["CUDA_DEVICE_SM_LIMIT_1"]) == ("30",) * 3
    m = mounts(r)
    assert m["/tmp/vgpu"] == (f"{sim.hook}/containers/{uid}_c1", False)  # not _side
    assert "/etc/ld.so.preload" in m  # side's CUDA_DISABLE_CONTROL does not leak into c1
    assert os.path.isdir(f"{sim.hook}/containers/{uid}_c1")
    assert sim.annotations("p")[keys.DEVICES_TO_ALLOCATE] == f";{UUIDS[1]},NVIDIA,2000,0:"
    assert sim.annotations("p")[keys.BIND_PHASE] == "allocating"
    assert "hamivgpu" in sim.node_annotations()
    # c2
    r2 = sim.allocate(N, sim.preferred(1))
    assert envs(r2)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[1]
    assert envs(r2)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m" and envs(r2)["CUDA_DEVICE_SM_LIMIT"] == "0"
    assert mounts(r2)["/tmp/vgpu"][0].endswith(f"{uid}_c2")
    ann = sim.annotations("p")
    assert (ann[keys.DEVICES_TO_ALLOCATE], ann[keys.BIND_PHASE], ann[keys.VGPU_TIME]) == (
        ";",
        "success",
        keys.VGPU_TIME_DONE,
    )
    assert "hamivgpu" not in sim.node_annotations()
    # c2's memory call arrives after the pod completed: ordering rule → empty, never an error.
    assert envs(sim.allocate(M, sim.memory_ids(2000))) == {}
    assert sim.events(ev.REASON_UNLIMITED_CONTAINER) == []


def test_cuda_disable_control_true_drops_preload_only_parsebool_true(sim):
    for i, value in enumerate(["true", "1", "T", "yes", "false"]):
        sim.schedule(
            f"p{i}",
            [{"name": "c", "limits": {NUMBER: 1}, "env": {"CUDA_DISABLE_CONTROL": value}}],
            [[dev(0)]],
            vgpu_time=100 + i,
        )
        r = sim.allocate(N, sim.preferred(1))
        assert ("/etc/ld.so.preload" in mounts(r)) is (value in ("yes", "false")), value
        assert len(r.mounts) == (4 if value in ("yes", "false") else 3)


def test_a1_pods_with_different_counts_admitted_younger_first(sim):
    sim.schedule("x", [{"name": "c", "limits": {NUMBER: 2}}], [[dev(0), dev(1)]], vgpu_time=100)
    sim.schedule("y", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(1)]], vgpu_time=200)
    ry = sim.allocate(N, sim.preferred(1))
    assert envs(ry)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[1]
    assert mounts(ry)["/tmp/vgpu"][0].endswith(f"{sim.uid('y')}_c")
    rx = sim.allocate(N, sim.preferred(2))
    assert mounts(rx)["/tmp/vgpu"][0].endswith(f"{sim.uid('x')}_c")
    assert sim.annotations("x")[keys.BIND_PHASE] == sim.annotations("y")[keys.BIND_PHASE] == "success"


def test_a2_disambiguates_by_kubelet_device_gpus_and_keeps_existing_dirs(sim):
    sim.schedule("a", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=100)
    sim.schedule("b", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(1)]], vgpu_time=100)
    running = sim.hook / "containers" / f"{sim.uid('b')}_c"
    running.mkdir(parents=True)
    (running / "old.cache").write_bytes(b"x")
    # The kubelet admits b first and picks IDs of b's GPU (it may ignore our preference).
    rb = sim.allocate(N, sim.number_ids(1, start=3))
    assert envs(rb)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[1]
    assert mounts(rb)["/tmp/vgpu"][0] == str(running)
    assert (running / "old.cache").exists()  # never RemoveAll (plugin#138)
    ra = sim.allocate(N, sim.number_ids(0))
    assert envs(ra)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[0]
    assert mounts(ra)["/tmp/vgpu"][0].endswith(f"{sim.uid('a')}_c")


def test_a3_success_patch_fails_10x_allocate_ok_tombstone_and_background_retry(sim):
    sim.schedule("p1", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=100)
    sim.schedule("p2", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=200)
    sim.api.faults.fail("patch", "pods", name="p1", status=500, count=10)
    r1 = sim.allocate(N, sim.number_ids(0))
    assert mounts(r1)["/tmp/vgpu"][0].endswith(f"{sim.uid('p1')}_c")
    assert sim.annotations("p1")[keys.BIND_PHASE] == "allocating"  # not written yet
    r2 = sim.allocate(N, sim.number_ids(0, start=1))  # p1 (older) is tombstoned: never matched again
    assert mounts(r2)["/tmp/vgpu"][0].endswith(f"{sim.uid('p2')}_c")
    sim.store.wait_for(
        lambda s: s.get("pods", "default", "p1")["metadata"]["annotations"].get(keys.BIND_PHASE) == "success",
        10,
        "background success patch",
    )
    assert sim.annotations("p1")[keys.DEVICES_TO_ALLOCATE] == ""


def test_a4_identical_pods_admitted_in_creation_order_each_get_own_gpu(sim):
    gpus = [0, 1, 0, 1]
    for i, g in enumerate(gpus):
        sim.schedule(f"w{i}", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(g)]])
    for i, g in enumerate(gpus):  # the kubelet admits a batch in creation order
        r = sim.allocate(N, sim.preferred(1))
        assert envs(r)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[g]
        assert mounts(r)["/tmp/vgpu"][0].endswith(f"{sim.uid(f'w{i}')}_c")


def test_a6_three_gpu_containers_consume_segment_by_segment(sim):
    ctrs = [
        {"name": "a", "limits": {NUMBER: 1}},
        {"name": "b", "limits": {NUMBER: 2}},
        {"name": "c", "limits": {NUMBER: 1}},
    ]
    segs = [[dev(0)], [dev(0), dev(1)], [dev(1)]]
    sim.schedule("p", ctrs, segs)
    seen = [sim.annotations("p")[keys.DEVICES_TO_ALLOCATE]]
    for size in (1, 2, 1):
        sim.allocate(N, sim.preferred(size))
        seen.append(sim.annotations("p")[keys.DEVICES_TO_ALLOCATE])
    e = [encode_pod_devices([s]) for s in segs]
    assert seen == [f"{e[0]};{e[1]};{e[2]}", f";{e[1]};{e[2]}", f";;{e[2]}", ";;"]
    assert sim.annotations("p")[keys.BIND_PHASE] == "success"


def test_a7_memory_only_container_served_by_memory_call_and_interleaving(sim):
    ctrs = [{"name": "both", "limits": {NUMBER: 1, MEMORY: 2000}}, {"name": "mem", "limits": {MEMORY: 2000}}]
    sim.schedule("p", ctrs, [[dev(0, 2000)], [dev(1, 2000)]])
    # Container "both": memory call first (not its primary → empty), then the count call.
    assert envs(sim.allocate(M, sim.memory_ids(2000))) == {}
    rb = sim.allocate(N, sim.preferred(1))
    assert envs(rb)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[0]
    # Container "mem": only a memory call; it is the primary one.
    rm = sim.allocate(M, sim.memory_ids(2000, 1))
    assert envs(rm)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[1]
    assert envs(rm)["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m"
    assert mounts(rm)["/tmp/vgpu"][0].endswith(f"{sim.uid('p')}_mem")
    assert sim.annotations("p")[keys.BIND_PHASE] == "success"


def test_a8_init_container_requesting_vgpu_fails_the_pod(sim):
    sim.schedule(
        "p",
        [{"name": "app", "limits": {NUMBER: 1}}],
        [[dev(0)]],
        init=[{"name": "init", "limits": {NUMBER: 1}}],
        lock=True,
    )
    with pytest.raises(AllocationError, match=ERR_INIT):
        sim.allocate(N, sim.preferred(1))
    assert_failed(sim, "p", ERR_INIT)


@pytest.mark.parametrize(
    "case", ["unhealthy", "libvgpu-missing", "mig-id-on-hami-core", "foreign-gpu", "patch-refused"]
)
def test_a9_every_failure_posts_event_sets_failed_and_releases_lock(sim_factory, case):
    sim = sim_factory(with_libvgpu=case != "libvgpu-missing")
    d = dev(0)
    if case == "mig-id-on-hami-core":
        d = ContainerDevice(UUIDS[0], 1000, 0, MigSlot("group1", 0))
    if case == "foreign-gpu":
        d = ContainerDevice("GPU-deadbeef-0000-0000-0000-000000000000", 1000, 0)
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 1}}], [[d]], lock=True)
    if case == "unhealthy":
        sim.health.mark_unhealthy(UUIDS[0], "Xid 79")
    if case == "patch-refused":
        sim.api.faults.fail("patch", "pods", name="p", status=422, count=1)
    expected = {
        "unhealthy": f"assigned GPU {UUIDS[0]} is unhealthy",
        "libvgpu-missing": f"HAMi-core files missing under {sim.hook}",
        "mig-id-on-hami-core": "device mode mismatch",
        "foreign-gpu": "is not on this node",
        "patch-refused": "cannot record the allocation",
    }[case]
    with pytest.raises(AllocationError, match=expected.replace("[", r"\[")):
        sim.allocate(N, sim.number_ids(0))
    assert_failed(sim, "p", expected)


def test_malformed_pod_failed_on_sight_and_call_proceeds_with_others(sim):
    sim.set_lock()
    sim.bind_raw(
        "bad",
        [{"name": "c", "limits": {NUMBER: 1}}],
        {
            keys.VGPU_NODE: NODE,
            keys.BIND_PHASE: "allocating",
            keys.VGPU_TIME: "50",
            keys.DEVICES_TO_ALLOCATE: f"{UUIDS[0]},NVIDIA,12x,0:",
        },
    )
    sim.schedule("good", [{"name": "c", "limits": {NUMBER: 2}}], [[dev(0), dev(1)]], vgpu_time=100)
    r = sim.allocate(N, sim.preferred(2))
    assert mounts(r)["/tmp/vgpu"][0].endswith(f"{sim.uid('good')}_c")
    assert_failed(
        sim,
        "bad",
        "invalid devices-to-allocate: volcano.sh/devices-to-allocate: segment 0, device 0, field usedmem: not a uint32",
    )


def test_malformed_only_candidate_returns_the_decode_error(sim):
    sim.set_lock()
    sim.bind_raw(
        "bad",
        [{"name": "c", "limits": {NUMBER: 1}}],
        {
            keys.VGPU_NODE: NODE,
            keys.BIND_PHASE: "allocating",
            keys.VGPU_TIME: "50",
            keys.DEVICES_TO_ALLOCATE: "garbage",
        },
    )
    with pytest.raises(AllocationError, match="invalid devices-to-allocate"):
        sim.allocate(N, sim.number_ids(0))
    assert_failed(sim, "bad", "invalid devices-to-allocate")


def test_segment_count_mismatch_is_malformed(sim):
    sim.bind_raw(
        "p",
        [{"name": "c", "limits": {NUMBER: 1}}],
        {
            keys.VGPU_NODE: NODE,
            keys.BIND_PHASE: "allocating",
            keys.VGPU_TIME: "50",
            keys.DEVICES_TO_ALLOCATE: f"{UUIDS[0]},NVIDIA,10,0:;{UUIDS[1]},NVIDIA,10,0:",
        },
    )
    with pytest.raises(AllocationError, match="has 2 segment"):
        sim.allocate(N, sim.number_ids(0))
    assert_failed(sim, "p", "1 container(s) requesting vGPU")


def test_r4_no_pending_pod_errors_posts_node_event_and_releases_lock(sim):
    sim.set_lock()
    with pytest.raises(AllocationError, match=ERR_NO_POD):
        sim.allocate(N, sim.number_ids(0))
    assert "hamivgpu" not in sim.node_annotations()
    nev = sim.events(ev.REASON_NO_POD)
    assert len(nev) == 1 and nev[0]["involvedObject"]["kind"] == "Node" and nev[0]["type"] == "Warning"
    # A memory call that matches nothing never fails; it says so on the Node.
    assert envs(sim.allocate(M, sim.memory_ids(100))) == {}
    assert len(sim.events(ev.REASON_UNLIMITED_CONTAINER)) == 1


def test_count_mismatch_is_not_a_candidate(sim):
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 2}}], [[dev(0), dev(1)]])
    with pytest.raises(AllocationError, match=ERR_NO_POD):
        sim.allocate(N, sim.number_ids(0))
    assert sim.annotations("p")[keys.BIND_PHASE] == "allocating"  # not this pod's call: untouched


def test_cores_and_multiple_requests(sim):
    req = pb.AllocateRequest(
        container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["a"]),
            pb.ContainerAllocateRequest(devices_ids=["b"]),
        ]
    )
    with pytest.raises(AllocationError, match=ERR_MULTIPLE):
        sim.allocator.allocate(sim.managers[N], req)
    assert len(sim.allocator.allocate(sim.managers[C], req).container_responses) == 2


def test_pci_bus_order_sets_limit_indices(sim_factory):
    sim = sim_factory([gpu(0, pci="00000000:8A:00.0"), gpu(1, pci="00000000:0B:00.0")])
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 2}}], [[dev(0, 1000, 10), dev(1, 2000, 20)]])
    e = envs(sim.allocate(N, sim.preferred(2)))
    assert e["NVIDIA_VISIBLE_DEVICES"] == f"{UUIDS[1]},{UUIDS[0]}"
    assert (e["CUDA_DEVICE_MEMORY_LIMIT_0"], e["CUDA_DEVICE_MEMORY_LIMIT_1"]) == ("2000m", "1000m")
    assert (e["CUDA_DEVICE_SM_LIMIT"], e["CUDA_DEVICE_SM_LIMIT_0"], e["CUDA_DEVICE_SM_LIMIT_1"]) == ("20", "20", "10")


def test_zero_memory_limit_posts_event(sim):
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0, 0)]])
    e = envs(sim.allocate(N, sim.number_ids(0)))
    assert e["CUDA_DEVICE_MEMORY_LIMIT_0"] == "0m"
    assert len(sim.events(ev.REASON_ZERO_MEMORY_LIMIT)) == 1


def test_factor_and_policy_and_log_level(sim_factory):
    sim = sim_factory(cfg=make_config(gpu_memory_factor=10, gpu_core_policy="force", lib_cuda_log_level=3))
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0, 300)]])
    e = envs(sim.allocate(N, sim.number_ids(0)))
    assert e["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"
    assert e["GPU_CORE_UTILIZATION_POLICY"] == "force" and e["LIBCUDA_LOG_LEVEL"] == "3"


def test_deleting_and_terminal_pods_are_not_candidates(sim):
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]])
    sim.store.patch("pods", "default", "p", {"status": {"phase": "Failed"}}, subresource="status")
    sim.cache.wait_for(lambda c: any(p["status"].get("phase") == "Failed" for p in c.items()), 5)
    with pytest.raises(AllocationError, match=ERR_NO_POD):
        sim.allocate(N, sim.number_ids(0))


def test_watch_lag_is_covered_by_one_node_scoped_resync(sim):
    sim.cache.stop()  # the watch delivers nothing any more
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]])
    sim.api.requests.reset()
    r = sim.allocate(N, sim.number_ids(0))
    assert envs(r)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[0]
    lists = [q for q in sim.api.requests.requests(verb="list", resource="pods")]
    assert len(lists) == 1 and "spec.nodeName" in lists[0].query  # never cluster-wide


def test_restart_mid_admission_journal_marks_consumed_segments_served(sim):
    ctrs = [{"name": "a", "limits": {NUMBER: 1, MEMORY: 100}}, {"name": "b", "limits": {NUMBER: 1, MEMORY: 100}}]
    sim.schedule("p", ctrs, [[dev(0, 100)], [dev(1, 100)]])
    sim.allocate(N, sim.number_ids(0))
    fresh = VolcanoAllocator(
        node_name=NODE,
        client=sim.client,
        pods=sim.cache,
        config=sim.allocator.config,
        hook_path=str(sim.hook),
        vgpulock_dir=sim.allocator.layout.vgpulock_dir,
        retry=sim.retry,
        sleep=lambda _s: None,
    )
    sim.allocator = fresh
    sim.cache.wait_for(
        lambda c: any(
            p["metadata"]["annotations"].get(keys.DEVICES_TO_ALLOCATE, "x").startswith(";") for p in c.items()
        ),
        5,
    )
    # a's memory call (late) is not misread as b's; b's count call gets b's segment.
    assert envs(sim.allocate(M, sim.memory_ids(100))) == {}
    r = sim.allocate(N, sim.number_ids(1))
    assert mounts(r)["/tmp/vgpu"][0].endswith(f"{sim.uid('p')}_b")


def test_preferred_allocation_steers_to_candidate_gpus(sim):
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 2}}], [[dev(1), dev(0)]])
    avail = [i for i, _ in sim.managers[N].devices()]
    assert set(sim.preferred(2, avail)) == {f"{UUIDS[0]}-0", f"{UUIDS[1]}-0"}
    # Without a candidate: must-include + (minor, i) order.
    assert sim.preferred(1, avail) == [f"{UUIDS[0]}-0"]


def test_in_progress_pod_wins_later_containers(sim):
    """X = [1 GPU, 2 GPUs], Y = [2 GPUs] (older vgpu-time). After X's first container, X's second
    (2 GPUs) must not be steered to Y, although Y has the smaller vgpu-time."""
    sim.schedule("y", [{"name": "c", "limits": {NUMBER: 2}}], [[dev(0), dev(1)]], vgpu_time=100)
    sim.schedule(
        "x",
        [{"name": "a", "limits": {NUMBER: 1}}, {"name": "b", "limits": {NUMBER: 2}}],
        [[dev(1)], [dev(1), dev(0)]],
        vgpu_time=200,
    )
    ra = sim.allocate(N, sim.preferred(1))
    assert mounts(ra)["/tmp/vgpu"][0].endswith(f"{sim.uid('x')}_a")
    rb = sim.allocate(N, sim.preferred(2))
    assert mounts(rb)["/tmp/vgpu"][0].endswith(f"{sim.uid('x')}_b")
    ry = sim.allocate(N, sim.preferred(2))
    assert mounts(ry)["/tmp/vgpu"][0].endswith(f"{sim.uid('y')}_c")


def test_a13_fuzz_random_annotations_never_crash(sim):
    rng = random.Random(13)
    alphabet = "GPU-0123456789abcdef,:;[]NVIDIA \x00é"
    for i in range(60):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        if rng.random() < 0.3:
            value = f"{UUIDS[0]},NVIDIA,{rng.choice(['1', '-1', '99999999999', 'x', ''])},{rng.randint(0, 200)}:"
        sim.bind_raw(
            f"f{i}",
            [{"name": "c", "limits": {NUMBER: 1}}],
            {
                keys.VGPU_NODE: NODE,
                keys.BIND_PHASE: "allocating",
                keys.VGPU_TIME: str(rng.randint(0, 10**22)),
                keys.DEVICES_TO_ALLOCATE: value,
            },
        )
        try:
            sim.allocate(rng.choice([N, M]), sim.number_ids(0))
        except AllocationError:
            pass
    assert all(sim.annotations(f"f{i}")[keys.BIND_PHASE] in ("failed", "success") for i in range(60))


def test_scheduler_allocation_helper_roundtrip():
    ann = scheduler_allocation(NODE, [[dev(0)]], 5)
    assert ann[keys.DEVICES_TO_ALLOCATE] == ann[keys.VGPU_IDS_NEW]


def test_failure_while_api_unreachable_is_written_once_it_is_back(sim):
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], lock=True)
    sim.cache.wait_for(lambda c: len(c.items()) == 1, 5)
    sim.health.mark_unhealthy(UUIDS[0], "Xid 79")
    port = sim.api.port
    sim.api.stop()
    with pytest.raises(AllocationError, match="is unhealthy"):
        sim.allocate(N, sim.number_ids(0))
    assert len(sim.retry.pending()) == 3  # event, bind-phase=failed, lock release
    sim.api.start(port=port)
    sim.store.wait_for(
        lambda s: s.get("pods", "default", "p")["metadata"]["annotations"].get(keys.BIND_PHASE) == "failed",
        15,
        "queued bind-phase=failed",
    )
    sim.store.wait_for(
        lambda s: (
            "hamivgpu" not in (s.get("nodes", None, NODE)["metadata"].get("annotations") or {}) and s.list("events")
        ),
        15,
        "queued lock release and event",
    )
    assert_failed(sim, "p", "is unhealthy")


def test_a8_init_container_call_with_its_own_count_fails_the_pod(sim):
    sim.schedule(
        "p",
        [{"name": "app", "limits": {NUMBER: 2}}],
        [[dev(0), dev(1)]],
        init=[{"name": "init", "limits": {NUMBER: 1}}],
        lock=True,
    )
    with pytest.raises(AllocationError, match=ERR_INIT):
        sim.allocate(N, sim.number_ids(0))  # the init container's call: 1 device
    assert_failed(sim, "p", ERR_INIT)


def test_a2_watch_lag_behind_the_admitted_pod_is_caught_by_one_node_list(sim):
    """The kubelet admits b, whose pod our watch has not delivered yet, while a (other GPU, same count)
    is already cached: the kubelet's IDs match no cached candidate's GPUs, so Allocate re-lists this
    node's pods once before choosing — b is served, a keeps waiting (no wrong-pod handout)."""
    sim.schedule("a", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=100)
    assert sim.cache.wait_for(lambda c: len(c.items()) == 1, 5)
    sim.cache.stop()  # from here on the cache only learns through the allocator's own re-list
    sim.schedule("b", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(1)]], vgpu_time=50)
    before = sim.allocator.stats.resyncs
    rb = sim.allocate(N, sim.number_ids(1))
    assert envs(rb)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[1]
    assert mounts(rb)["/tmp/vgpu"][0].endswith(f"{sim.uid('b')}_c")
    assert sim.allocator.stats.resyncs == before + 1
    assert sim.annotations("b")[keys.BIND_PHASE] == "success"
    assert sim.annotations("a")[keys.BIND_PHASE] == "allocating"


def test_a_plain_admission_lists_nothing_the_late_memory_call_is_the_active_pods(sim):
    """number then memory for a one-container pod: served from the watch cache, no LIST at all."""
    sim.schedule("p", [{"name": "c", "limits": {NUMBER: 1, "volcano.sh/vgpu-memory": 1000}}], [[dev(0)]], vgpu_time=100)
    assert sim.cache.wait_for(lambda c: len(c.items()) == 1, 5)
    before = sim.allocator.stats.resyncs
    r = sim.allocate(N, sim.preferred(1))
    assert envs(r)["NVIDIA_VISIBLE_DEVICES"] == UUIDS[0]
    assert sim.allocate(ResourceKind.MEMORY, sim.memory_ids(1000)) == pb.ContainerAllocateResponse()
    assert sim.allocator.stats.resyncs == before
    assert sim.annotations("p")[keys.BIND_PHASE] == "success"
