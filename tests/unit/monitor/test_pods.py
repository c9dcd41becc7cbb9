"""PodInfo: what the monitor keeps of a pod object."""

from __future__ import annotations

from vgpu.monitor.pods import PodIndex, PodInfo
from vgpu.protocol.pod_model import ResourceNames
from vgpu.sim.pods import StaticPods

from .helpers import new_uid, pod


def test_fields_from_a_pod_object():
    uid = new_uid()
    obj = pod(
        uid,
        "p",
        namespace="ns",
        containers=["a", "b"],
        phase="Succeeded",
        annotations={"volcano.sh/bind-phase": "success", "volcano.sh/vgpu-ids-new": "x", "other": "y"},
    )
    obj["spec"]["containers"][1]["resources"] = {"limits": {"volcano.sh/vgpu-memory": "1024"}}
    info = PodInfo.from_object(obj)
    assert info == PodInfo(
        uid, "ns", "p", frozenset({"a", "b"}), True, ("b",), "success", "x", assignment_error=info.assignment_error
    )
    assert info.assigned == {} and info.assignment_error.startswith("volcano.sh/vgpu-ids-new: segment 0, device 0")


def test_each_vgpu_container_gets_its_segment_and_its_stated_priority():
    # docs/protocol.md §3.1: segment k belongs to the k-th container that requests vGPU (spec order).
    g = [f"GPU-{i}0000000-0000-0000-0000-000000000000" for i in range(3)]
    obj = pod(new_uid(), "p", containers=["a", "side", "b"], gpus={"a": [g[0], g[1]], "b": [g[2]]})
    a, side, b = obj["spec"]["containers"]
    a["env"] = [{"name": "CUDA_TASK_PRIORITY", "value": "7"}, {"name": "CUDA_TASK_PRIORITY", "value": " -3x"}]
    b["env"] = [{"name": "CUDA_TASK_PRIORITY", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]
    info = PodInfo.from_object(obj)
    assert info.vgpu_containers == ("a", "b")
    assert info.assigned_gpus("a") == {g[0], g[1]} and info.assigned_gpus("b") == {g[2]}
    assert info.assigned_gpus("side") == frozenset() and info.assigned_gpus("nope") == frozenset()
    assert info.priorities == {"a": -3}  # the last entry wins, read as atoi; b's is not in the spec
    assert info.assignment_error is None


def test_a_segment_count_that_allocate_would_refuse_assigns_nothing():
    obj = pod(new_uid(), "p", containers=["a"], gpus={"a": ["GPU-00000000-0000-0000-0000-000000000000"]})
    obj["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"] += ";"  # two segments, one vGPU container
    info = PodInfo.from_object(obj)
    assert info.assigned == {} and "2 segment(s) but the pod has 1" in info.assignment_error


def test_the_first_assignment_seen_is_kept(caplog):
    # vgpu-ids-new never changes after scheduling (docs/protocol.md §3.1): a later edit is ignored.
    mine, theirs = "GPU-00000000-0000-0000-0000-000000000000", "GPU-11111111-0000-0000-0000-000000000000"
    uid = new_uid()
    idx = StaticPods([pod(uid, "p", gpus={"main": [mine]})])
    with caplog.at_level("WARNING", logger="vgpu.monitor.pods"):
        idx.apply("MODIFIED", pod(uid, "p", gpus={"main": [theirs]}))
        idx.replace([pod(uid, "p", gpus={"main": [theirs]})])
        idx.apply("MODIFIED", pod(uid, "p", gpus={"main": [theirs]}))
    assert idx.get(uid).assigned_gpus("main") == {mine}
    assert sum("changed from" in r.getMessage() for r in caplog.records) == 1
    idx.apply("DELETED", pod(uid, "p"))
    idx.apply("ADDED", pod(uid, "p", gpus={"main": [theirs]}))  # a pod seen anew (after its deletion)
    assert idx.get(uid).assigned_gpus("main") == {theirs}


def test_vgpu_containers_follow_the_configured_resource_names():
    obj = pod(new_uid(), "p", containers=["a", "b", "c"], annotations={"volcano.sh/vgpu-ids-new": "x"})
    obj["spec"]["containers"][0]["resources"] = {"limits": {"example.com/gpu-count": "1"}}
    obj["spec"]["containers"][2]["resources"] = {"limits": {"volcano.sh/vgpu-number": "1"}}
    names = ResourceNames("example.com/gpu-count", "example.com/gpu-mem", "example.com/gpu-cores")
    assert PodInfo.from_object(obj, names).vgpu_containers == ("a",)
    assert PodInfo.from_object(obj).vgpu_containers == ("c",)


def test_malformed_objects_are_ignored():
    assert PodInfo.from_object({"metadata": {"name": "no-uid"}}) is None
    idx = StaticPods([{"metadata": {}}, {"metadata": {"uid": "u1", "name": "n"}, "spec": {"containers": "junk"}}])
    assert [p.uid for p in idx.pods()] == ["u1"] and idx.get("u1").containers == frozenset()


def test_unsynced_until_the_first_list():
    idx = PodIndex()
    assert not idx.synced
    idx.apply("ADDED", pod("u", "p"))
    assert not idx.synced and idx.get("u").name == "p"
    idx.replace([])
    assert idx.synced and idx.get("u") is None
