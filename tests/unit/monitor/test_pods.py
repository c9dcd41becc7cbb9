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
    assert info == PodInfo(uid, "ns", "p", frozenset({"a", "b"}), True, ("b",), "success", "x")


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
