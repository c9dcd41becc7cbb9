"""Dynamic MIG end to end: the real `vgpu plugin` process in mode mig on the fake NVML, the
simulated API server, the fake kubelet's admission and the Volcano scheduler emulator.

Covers the issue's end-to-end items: a node in mig mode (two GPUs in two groups at once), a
mixed node (MIG GPUs next to GPUs that cannot serve MIG), the scheduler's duplicate-position
quirk (G-5) and an apply failure that fails the pod while the plugin keeps serving (G-2).
"""

from __future__ import annotations

import json

from tests.integration.volcano.conftest import (  # noqa: F401 - fixtures used by name
    MEMORY,
    NODE,
    NUMBER,
    apiserver,
    cluster_factory,
    hook_path,
)
from vgpu.nvml import errors
from vgpu.protocol import decode_pod_devices, decode_register, keys
from vgpu.sim.kubelet.admission import pod_manifest
from vgpu.sim.nvml import fakenvml

from .conftest import A100, MigChild
from .test_mig_apply import PLANS, check_layout

NODE_CONFIG = json.dumps({"nodeconfig": [{"name": NODE, "operatingmode": "mig", "devicesplitcount": 7}]})
G = [f"GPU-{i:08x}-6888-5063-1e4d-f2a09cfbf{i:03x}" for i in range(3)]
MIG_POD = {keys.VGPU_MODE: "mig"}


def mig_cluster(cluster_factory, devices=None):  # noqa: F811
    return cluster_factory(devices or [fakenvml.device(0), fakenvml.device(1)], node_config=NODE_CONFIG)


def nvml_view(cluster) -> MigChild:
    """A separate process on the same fake GPUs, reading what the plugin made (read-only)."""
    return MigChild(cluster.nvml, None, startup=False)


def slot_of(cluster, pod: str) -> tuple[int, str, int]:
    """(GPU index, group, position) of a one-device pod's assignment."""
    ((device,),) = decode_pod_devices(cluster.annotations(pod)[keys.VGPU_IDS_NEW])
    assert device.mig is not None
    return G.index(device.uuid), device.mig.group, device.mig.position


def mig_pod(name: str, memory: int, containers: int = 1) -> dict:
    return pod_manifest(
        name, [{"name": f"c{k}", "limits": {NUMBER: 1, MEMORY: memory}} for k in range(containers)], annotations=MIG_POD
    )


def test_mig_node_two_pods_two_gpus_two_groups(cluster_factory):  # noqa: F811
    cluster = mig_cluster(cluster_factory)
    reg = decode_register(cluster.node()["metadata"]["annotations"][keys.REGISTER])
    assert [(r.uuid, r.mode, r.count) for r in reg] == [(G[0], "mig", 7), (G[1], "mig", 7)]
    view = nvml_view(cluster)
    try:
        assert view.call("layout(0)") == [] and view.call("layout(1)") == []  # MIG on, nothing carved yet
        sched = cluster.scheduler("master")
        # Each pod is admitted right after it is bound, as the kubelet does (it cannot tell the
        # plugin which pod it admits; two pods pending with the same shape are matched oldest first).
        cluster.create_pod(mig_pod("small", 8000))
        assert [o.node for o in sched.schedule_once()] == [NODE]
        small = cluster.admit("small")
        cluster.create_pod(mig_pod("big", 15000))
        assert [o.node for o in sched.schedule_once()] == [NODE]
        big = cluster.admit("big")
        assert small.admitted and big.admitted, (small.error, big.error)
        small_slot, big_slot = slot_of(cluster, "small"), slot_of(cluster, "big")
        assert small_slot[1:] == ("group1", 0)  # 1g.10gb: the first group that fits
        # group1 sticks on that GPU and 15000 MiB needs a 2g.20gb: the other GPU, group2
        assert big_slot[0] != small_slot[0] and big_slot[1:] == ("group2", 0)
        for res, (gpu, group, pos) in ((small, small_slot), (big, big_slot)):
            c = res.container("c0")
            assert c.envs == {"NVIDIA_VISIBLE_DEVICES": view.call(f"lookup({gpu}, {group!r}, {pos})")["uuid"]}
            assert list(c.mounts) == []  # no HAMi-core in mig mode
        for p in ("small", "big"):
            ann = cluster.annotations(p)
            assert ann[keys.BIND_PHASE] == "success" and ann[keys.DEVICES_TO_ALLOCATE] == ""
        assert [g["profile"] for g in view.call(f"layout({small_slot[0]})")] == ["1g.10gb"] * 7
        assert [(g["profile"], g["start"]) for g in view.call(f"layout({big_slot[0]})")] == [
            ("2g.20gb", 0),
            ("2g.20gb", 2),
            ("2g.20gb", 4),
            ("1g.10gb", 6),
        ]
        # a second pod in the first GPU's group gets the next position, on the instance already there
        cluster.create_pod(mig_pod("next", 8000))
        sched.schedule_once()
        assert slot_of(cluster, "next") == (small_slot[0], "group1", 1)
        nxt = cluster.admit("next")
        assert nxt.admitted, nxt.error
        expected = view.call(f"lookup({small_slot[0]}, 'group1', 1)")["uuid"]
        assert nxt.container("c0").envs["NVIDIA_VISIBLE_DEVICES"] == expected
    finally:
        view.close()


def test_duplicate_position_in_one_pod_fails_the_second_container(cluster_factory):  # noqa: F811  G-5
    cluster = mig_cluster(cluster_factory)
    cluster.create_pod(mig_pod("twins", 8000, containers=2))
    cluster.scheduler("master").schedule_once()
    first, second = decode_pod_devices(cluster.annotations("twins")[keys.VGPU_IDS_NEW])
    assert first == second and first[0].mig.position == 0  # the scheduler quirk
    res = cluster.admit("twins")
    assert not res.admitted and "UnexpectedAdmissionError" in res.error
    assert f"MIG position 0 of group group1 on {first[0].uuid} is already assigned" in res.error
    assert cluster.annotations("twins")[keys.BIND_PHASE] == "failed"
    events = cluster.events("VGPUAllocationFailed")
    assert [e["involvedObject"]["name"] for e in events] == ["twins"]
    assert cluster.plugin.proc.poll() is None


def test_apply_failure_fails_the_pod_rolls_back_and_the_plugin_keeps_serving(cluster_factory):  # noqa: F811 G-2
    cluster = mig_cluster(cluster_factory)
    cluster.nvml.inject_error("nvmlGpuInstanceCreateComputeInstance", errors.NVML_ERROR_INSUFFICIENT_RESOURCES)
    sched = cluster.scheduler("master")
    cluster.create_pod(mig_pod("unlucky", 30000))  # group3: 2 × 3g.40gb
    sched.schedule_once()
    res = cluster.admit("unlucky")
    assert not res.admitted
    gpu = slot_of(cluster, "unlucky")[0]
    assert f"MIG apply failed on {G[gpu]}: nvmlGpuInstanceCreateComputeInstance" in res.error
    assert "NVML_ERROR_INSUFFICIENT_RESOURCES" in res.error
    assert cluster.annotations("unlucky")[keys.BIND_PHASE] == "failed"
    view = nvml_view(cluster)
    try:
        assert view.call(f"layout({gpu})") == []  # the created GI was rolled back
        assert cluster.plugin.proc.poll() is None  # upstream exits here; we do not
        cluster.nvml.clear_error("nvmlGpuInstanceCreateComputeInstance")
        cluster.create_pod(mig_pod("lucky", 30000))
        sched.schedule_once()
        res = cluster.admit("lucky")
        assert res.admitted, res.error
        gpu, group, pos = slot_of(cluster, "lucky")
        assert group == "group3"
        layout_uuid = view.call(f"lookup({gpu}, 'group3', {pos})")["uuid"]
        assert res.container("c0").envs == {"NVIDIA_VISIBLE_DEVICES": layout_uuid}
    finally:
        view.close()


def test_mixed_node_serves_mig_on_the_capable_gpu_and_excludes_the_others(cluster_factory):  # noqa: F811 G-1
    devices = [
        fakenvml.device(0),
        fakenvml.device(1, name="Tesla T4", memory_total_mib=15360),
        fakenvml.device(2, name="NVIDIA H100 80GB HBM3"),
    ]  # no shipped geometry for H100
    cluster = mig_cluster(cluster_factory, devices)
    reg = decode_register(cluster.node()["metadata"]["annotations"][keys.REGISTER])
    assert [(r.uuid, r.mode) for r in reg] == [(G[0], "mig")]  # the others are not advertised
    events = {e["message"].split(" ")[2]: e for e in cluster.events("MIGDeviceExcluded")}
    assert set(events) == {G[1], G[2]}
    assert all(e["involvedObject"]["kind"] == "Node" and e["type"] == "Warning" for e in events.values())
    assert "not MIG-capable" in events[G[1]]["message"]
    assert "no knownMigGeometries entry" in events[G[2]]["message"]
    view = nvml_view(cluster)
    try:
        assert view.child.eval("node.nvml.get_mig_mode(node.manager.handle(node.uuid(2)))") == [0, 0]
        sched = cluster.scheduler("master")
        cluster.create_pod(mig_pod("m", 40000))  # 3g.40gb, group3
        sched.schedule_once()
        res = cluster.admit("m")
        assert res.admitted, res.error
        assert res.container("c0").envs == {"NVIDIA_VISIBLE_DEVICES": view.call("lookup(0, 'group3', 0)")["uuid"]}
        check_layout(view, PLANS[A100]["group3"], view.call("apply(0, 'group3')"))  # already in place: no-op
        # a pod that insists on hami-core sharing has no GPU on this node
        cluster.create_pod(
            pod_manifest(
                "h", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 1000}}], annotations={keys.VGPU_MODE: "hami-core"}
            )
        )
        assert [o.node for o in sched.schedule_once()] == [None]
    finally:
        view.close()
