"""Done-when of the Volcano-protocol issue, end to end with the real `vgpu plugin` process."""

from __future__ import annotations

import json
import os
import time

import grpc
import pytest

from tests.support.metrics_text import value
from vgpu.protocol import decode_register, decode_register_as_volcano, keys
from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import CORES, MEMORY, NODE, NUMBER, UUID0, UUID1, a100


def test_registers_exact_six_field_record_accepted_by_emulator(cluster):
    reg = cluster.node()["metadata"]["annotations"][keys.REGISTER]
    assert reg == (
        f"{UUID0},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
        f"{UUID1},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
    )
    assert [r.uuid for r in decode_register(reg)] == [UUID0, UUID1]
    for version in ("v1.9", "v1.12", "v1.15", "master"):
        sched = cluster.scheduler(version)
        sched.sync_nodes()
        assert NODE in sched.core.nodes, (version, sched.core.node_reasons)
        assert [g.uuid for g in sched.core.nodes[NODE].gpus] == [UUID0, UUID1]


def test_two_gpus_3000_mib_50_cores_gets_env_mounts_and_success(cluster):
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 2, MEMORY: 3000, CORES: 50}}]))
    out = cluster.scheduler("master").schedule_once()
    assert [o.node for o in out] == [NODE], out
    res = cluster.admit("p")
    assert res.admitted, res.error
    c = res.container("c")
    uid = cluster.pod("p")["metadata"]["uid"]
    e = c.envs
    assert e["NVIDIA_VISIBLE_DEVICES"] == f"{UUID0},{UUID1}"
    assert e["CUDA_DEVICE_MEMORY_LIMIT_0"] == e["CUDA_DEVICE_MEMORY_LIMIT_1"] == "3000m"
    assert e["CUDA_DEVICE_SM_LIMIT"] == e["CUDA_DEVICE_SM_LIMIT_0"] == e["CUDA_DEVICE_SM_LIMIT_1"] == "50"
    assert e["CUDA_DEVICE_MEMORY_SHARED_CACHE"].startswith("/tmp/vgpu/") and e[
        "CUDA_DEVICE_MEMORY_SHARED_CACHE"
    ].endswith(".cache")
    hook = str(cluster.hook_path)
    mounts = {m.container_path: (m.host_path, m.read_only) for m in c.mounts}
    assert mounts == {
        "/usr/local/vgpu/libvgpu.so": (f"{hook}/libvgpu.so", True),
        "/etc/ld.so.preload": (f"{hook}/ld.so.preload", True),
        "/tmp/vgpu": (f"{hook}/containers/{uid}_c", False),
        "/tmp/vgpulock": ("/tmp/vgpulock", False),
    }
    ann = cluster.annotations("p")
    assert ann[keys.BIND_PHASE] == "success"
    assert ann[keys.VGPU_TIME] == keys.VGPU_TIME_DONE
    assert ann[keys.DEVICES_TO_ALLOCATE] == ""


def _uid(cluster, name: str) -> str:
    return cluster.pod(name)["metadata"]["uid"]


def test_a11_memory_is_per_gpu_and_kubelet_deducts_it_once(cluster):
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 2, MEMORY: 3000}}]))
    cluster.scheduler("master").schedule_once()
    res = cluster.admit("p")
    assert res.admitted, res.error
    c = res.container("c")
    assert len(c.devices[MEMORY]) == 3000 and len(c.devices[NUMBER]) == 2
    assert c.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == c.envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == "3000m"


@pytest.mark.parametrize("version", ["master", "v1.15"])
def test_worked_example_first_container_without_gpu_and_cuda_disable_control(cluster, version):
    """docs/protocol.md §6 / A-5: segment k → k-th vGPU container; CUDA_DISABLE_CONTROL=true drops ld.so.preload."""
    cluster.create_pod(
        pod_manifest(
            "p",
            [
                {"name": "side", "env": {"CUDA_DISABLE_CONTROL": "true"}},
                {"name": "c1", "limits": {NUMBER: 2, MEMORY: 3000, CORES: 30}},
                {"name": "c2", "limits": {NUMBER: 1, MEMORY: 2000}, "env": {"CUDA_DISABLE_CONTROL": "true"}},
            ],
        )
    )
    out = cluster.scheduler(version).schedule_once()
    assert [o.node for o in out] == [NODE], out
    ann = cluster.annotations("p")
    assert ann[keys.VGPU_IDS_NEW] == (f"{UUID1},NVIDIA,3000,30:{UUID0},NVIDIA,3000,30:;{UUID1},NVIDIA,2000,0:")
    res = cluster.admit("p")
    assert res.admitted, res.error
    uid, hook = _uid(cluster, "p"), str(cluster.hook_path)
    assert res.container("side").envs == {} and res.container("side").mounts == []
    c1, c2 = res.container("c1"), res.container("c2")
    assert c1.envs["NVIDIA_VISIBLE_DEVICES"] == f"{UUID0},{UUID1}"
    assert c1.mount("/tmp/vgpu").host_path == f"{hook}/containers/{uid}_c1"
    assert c1.mount("/etc/ld.so.preload") is not None  # side's CUDA_DISABLE_CONTROL is not c1's
    assert c2.envs["NVIDIA_VISIBLE_DEVICES"] == UUID1 and c2.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "2000m"
    assert c2.envs["CUDA_DEVICE_SM_LIMIT"] == "0"
    assert c2.mount("/tmp/vgpu").host_path == f"{hook}/containers/{uid}_c2"
    assert c2.mount("/etc/ld.so.preload") is None and len(c2.mounts) == 3
    # The consumption went container by container (the plugin's own patches, in order).
    bodies = [
        json.loads(r.body)["metadata"]["annotations"]
        for r in cluster.api.requests.requests(verb="patch", resource="pods")
        if r.user_agent.startswith("vgpu-device-plugin")
    ]
    assert [b[keys.DEVICES_TO_ALLOCATE] for b in bodies] == [f";{UUID1},NVIDIA,2000,0:", ";"]
    assert bodies[-1][keys.BIND_PHASE] == "success" and bodies[-1][keys.VGPU_TIME] == keys.VGPU_TIME_DONE
    assert cluster.annotations("p")[keys.BIND_PHASE] == "success"
    assert os.stat(f"{hook}/containers/{uid}_c1").st_mode & 0o777 == 0o777


def test_malformed_annotation_grpc_error_failed_event_lock_released_daemon_survives(cluster):
    cluster.store.patch("nodes", None, NODE, {"metadata": {"annotations": {keys.NODE_LOCK: "2026-08-20T02:01:03Z"}}})
    cluster.create_pod(pod_manifest("bad", [{"name": "c", "limits": {NUMBER: 1}}]))
    cluster.store.bind(
        "default",
        "bad",
        NODE,
        {
            keys.VGPU_NODE: NODE,
            keys.VGPU_TIME: "1784884863",
            keys.BIND_PHASE: "allocating",
            keys.VGPU_IDS_NEW: f"{UUID0},NVIDIA,notanumber,0:",
            keys.DEVICES_TO_ALLOCATE: f"{UUID0},NVIDIA,notanumber,0:",
        },
    )
    res = cluster.admit("bad")
    assert res.error is not None and "UnexpectedAdmissionError" in res.error
    assert "invalid devices-to-allocate" in res.error and "field usedmem: not a uint32" in res.error
    ann = cluster.annotations("bad")
    assert ann[keys.BIND_PHASE] == "failed" and ann[keys.VGPU_TIME] == keys.VGPU_TIME_DONE
    events = cluster.events("VGPUAllocationFailed")
    assert len(events) == 1 and events[0]["involvedObject"]["name"] == "bad" and events[0]["type"] == "Warning"
    assert events[0]["message"].startswith("invalid devices-to-allocate: volcano.sh/devices-to-allocate: segment 0")
    assert keys.NODE_LOCK not in (cluster.node()["metadata"].get("annotations") or {})
    # The daemon keeps running and serves the next pod.
    assert cluster.plugin.proc.poll() is None
    cluster.create_pod(pod_manifest("good", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 1000}}]))
    cluster.scheduler("master").schedule_once()
    assert cluster.admit("good").admitted
    assert cluster.annotations("good")[keys.BIND_PHASE] == "success"


def test_r4_allocate_without_pending_pod_fails_that_pod_only(cluster):
    cluster.store.patch("nodes", None, NODE, {"metadata": {"annotations": {keys.NODE_LOCK: "2026-08-20T02:01:03Z"}}})
    cluster.create_pod(pod_manifest("orphan", [{"name": "c", "limits": {NUMBER: 1}}], scheduler_name="default"))
    cluster.store.bind("default", "orphan", NODE)  # bound without Volcano: no annotations
    res = cluster.admit("orphan")
    assert res.error is not None and "cannot get valid pod" in res.error
    assert keys.NODE_LOCK not in (cluster.node()["metadata"].get("annotations") or {})
    node_events = [e for e in cluster.events("VGPUNoPendingPod") if e["involvedObject"]["kind"] == "Node"]
    assert len(node_events) == 1
    assert cluster.plugin.proc.poll() is None


def test_handshake_auto_against_master_writes_once_at_startup(cluster):
    sched = cluster.scheduler("master")
    sched.start(interval=0.2)  # node watch + scheduling loop, as a running Volcano
    try:
        cluster.store.wait_for(lambda s: NODE in sched.core.nodes, 10, "the node is usable")
        # An observation window, not a synchronisation: a steady state must produce no writes.
        time.sleep(3)
    finally:
        sched.stop()
    writes = [
        r
        for r in cluster.api.requests.requests(verb="patch", resource="nodes")
        if r.user_agent.startswith("vgpu-device-plugin")
    ]
    assert len(writes) == 1
    body = json.loads(writes[0].body)["metadata"]["annotations"]
    assert set(body) == {keys.REGISTER, keys.HANDSHAKE} and body[keys.HANDSHAKE].startswith("Reported ")
    assert sched.counters.handshake_writes == 0


def test_handshake_auto_against_v115_node_is_used(cluster):
    sched = cluster.scheduler("v1.15")
    sched.sync_nodes()
    assert NODE in sched.core.nodes
    hs = cluster.node()["metadata"]["annotations"][keys.HANDSHAKE]
    assert hs.startswith("Requesting_")
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 1}}]))
    assert [o.node for o in sched.schedule_once()] == [NODE]
    assert cluster.admit("p").admitted


def test_r5_register_annotation_deleted_is_back_within_5s_with_one_patch(cluster):
    reg = cluster.node()["metadata"]["annotations"][keys.REGISTER]
    before = len(cluster.api.requests.requests(verb="patch", resource="nodes"))
    t0 = time.monotonic()
    cluster.store.patch("nodes", None, NODE, {"metadata": {"annotations": {keys.REGISTER: None}}})
    cluster.store.wait_for(
        lambda s: (s.get("nodes", None, NODE)["metadata"].get("annotations") or {}).get(keys.REGISTER) == reg,
        6,
        "register re-asserted",
    )
    assert time.monotonic() - t0 <= 5.5
    after = [
        r
        for r in cluster.api.requests.requests(verb="patch", resource="nodes")[before:]
        if r.user_agent.startswith("vgpu-device-plugin")
    ]
    assert len(after) == 1


def test_r1_register_decoded_by_every_volcano_version(cluster):
    for version in ("v1.9", "v1.10", "v1.11", "v1.12", "v1.13", "v1.14", "v1.15", "master"):
        sched = cluster.scheduler(version)
        sched.sync_nodes()
        gpus = sched.core.nodes[NODE].gpus
        assert [(g.id, g.uuid, g.number, g.memory) for g in gpus] == [(0, UUID0, 10, 81920), (1, UUID1, 10, 81920)]
        assert decode_register_as_volcano(
            cluster.node()["metadata"]["annotations"][keys.REGISTER],
            min_fields=5 if version in ("v1.9", "v1.10", "v1.11") else 6,
        ).devices


def test_a10_more_gpus_than_the_node_has_stays_pending(cluster_factory):
    c = cluster_factory([a100(0, UUID0)])
    c.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 2}}]))
    out = c.scheduler("master").schedule_once()
    assert out[0].node is None and f"no enough gpu cards on node {NODE}" in out[0].reason


def test_a12_split_2_third_pod_on_one_gpu_refused(cluster_factory):
    c = cluster_factory([a100(0, UUID0)], device_config="nvidia:\n  deviceSplitCount: 2\n")
    for i in range(3):
        c.create_pod(pod_manifest(f"p{i}", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 1000}}]))
    out = c.scheduler("master").schedule_once()
    assert [o.node for o in out] == [NODE, NODE, None]
    assert [c.admit(f"p{i}").admitted for i in range(2)] == [True, True]
    assert c.admitter.available(NUMBER) == []  # nothing admitted beyond the split


def test_unhealthy_gpu_after_scheduling_fails_allocation(cluster):
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 2}}]))
    cluster.scheduler("master").schedule_once()
    reg_before = cluster.node()["metadata"]["annotations"][keys.REGISTER]
    cluster.nvml.add_xid(0, 79)
    # The kubelet sees GPU 0's IDs turn unhealthy; the register annotation follows: GPU 0 is
    # withdrawn (--unhealthy-gpu-policy withdraw, docs/health.md §8), the pod scheduled before stays.
    cluster.store.wait_for(
        lambda s: s.get("nodes", None, NODE)["metadata"]["annotations"][keys.REGISTER] != reg_before,
        10,
        "register shows the unhealthy GPU",
    )
    assert cluster.node()["metadata"]["annotations"][keys.REGISTER] == (
        f"{UUID1},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
    )
    client = cluster.kubelet.plugin(NUMBER)
    # The kubelet would not offer unhealthy IDs; admit with the IDs the scheduler's GPUs map to anyway.
    ids = [f"{UUID0}-9", f"{UUID1}-9"]
    with pytest.raises(grpc.RpcError) as info:
        client.allocate([ids])
    assert f"assigned GPU {UUID0} is unhealthy" in info.value.details()
    assert cluster.annotations("p")[keys.BIND_PHASE] == "failed"
    failures = value(
        cluster.plugin.get("/metrics")[1],
        "vgpu_plugin_allocations_total",
        resource=NUMBER,
        result="failure",
        reason="unhealthy_gpu",
    )
    assert failures == 1


# docs/configuration.md §6: the ClusterRole grants exactly these; the plugin must need nothing else.
RBAC = {
    ("nodes", "get"),
    ("nodes", "list"),
    ("nodes", "watch"),
    ("nodes", "patch"),
    ("nodes", "update"),
    ("pods", "get"),
    ("pods", "list"),
    ("pods", "watch"),
    ("pods", "patch"),
    ("events", "create"),
    ("events", "patch"),
}


def test_plugin_requests_stay_within_the_clusterrole(cluster):
    cluster.store.patch("nodes", None, NODE, {"metadata": {"annotations": {keys.NODE_LOCK: "2026-08-20T02:01:03Z"}}})
    cluster.create_pod(pod_manifest("ok", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 100}}]))
    cluster.scheduler("v1.15").schedule_once()
    assert cluster.admit("ok").admitted
    cluster.create_pod(pod_manifest("orphan", [{"name": "c", "limits": {NUMBER: 1}}], scheduler_name="x"))
    cluster.store.bind("default", "orphan", NODE)
    assert not cluster.admit("orphan").admitted  # failure path: events, node lock
    used = {
        (r.resource, r.verb) for r in cluster.api.requests.requests() if r.user_agent.startswith("vgpu-device-plugin")
    }
    assert used <= RBAC, used - RBAC
    assert ("pods", "list") in used and ("events", "create") in used
    lists = [
        r
        for r in cluster.api.requests.requests(verb="list", resource="pods")
        if r.user_agent.startswith("vgpu-device-plugin")
    ]
    assert all("spec.nodeName" in r.query for r in lists)  # never a cluster-wide LIST


def test_invalid_handshake_mode_is_a_config_error(tmp_path):
    from tests.integration.plugin.conftest import PluginProcess
    from vgpu.sim.nvml import fakenvml

    nvml = fakenvml.FakeNvml.create(tmp_path / "hs", [a100(0, UUID0)])
    p = PluginProcess(
        tmp_path, str(tmp_path), nvml, env={"VGPU_HANDSHAKE": "sometimes", "KUBECONFIG": str(tmp_path / "none")}
    ).start()
    try:
        assert p.wait_exit(30) == 2
        assert "--handshake: must be one of auto, on, off (got 'sometimes')" in p.log()
    finally:
        p.terminate()


def test_unreadable_kubeconfig_is_a_config_error(tmp_path):
    from tests.integration.plugin.conftest import PluginProcess
    from vgpu.sim.nvml import fakenvml

    nvml = fakenvml.FakeNvml.create(tmp_path / "kc", [a100(0, UUID0)])
    p = PluginProcess(tmp_path, str(tmp_path), nvml, env={"KUBECONFIG": str(tmp_path / "missing.yaml")}).start()
    try:
        assert p.wait_exit(30) == 2
        assert f"cannot load kubeconfig {tmp_path / 'missing.yaml'}" in p.log()
    finally:
        p.terminate()


@pytest.mark.slow
def test_handshake_auto_real_process_answers_v115_stamp_after_30s(cluster):
    """Real time, real process: the scheduler stamps Requesting_ on the plugin's startup write and
    the plugin answers 30 s after seeing it (window [20, 40] s); the node stays usable."""
    sched = cluster.scheduler("v1.15")
    sched.start(interval=0.5)
    try:
        cluster.store.wait_for(lambda s: NODE in sched.core.nodes, 10, "node usable")
        t_stamp = time.monotonic()
        reply = cluster.store.wait_for(
            lambda s: [
                r
                for r in cluster.api.requests.requests(verb="patch", resource="nodes")
                if r.user_agent.startswith("vgpu-device-plugin") and r.monotonic > t_stamp
            ],
            45,
            "the plugin's answer to Requesting_",
        )
        waited = reply[0].monotonic - t_stamp
        assert 20 <= waited <= 40, waited
        assert json.loads(reply[0].body)["metadata"]["annotations"][keys.HANDSHAKE].startswith("Reported ")
        cluster.store.wait_for(lambda s: sched.counters.handshake_requesting >= 2, 10, "the next stamp")
        assert NODE in sched.core.nodes and sched.counters.handshake_deleted == 0
    finally:
        sched.stop()
