"""docs/failures.md A-12 end to end: the real `vgpu plugin` process, the scheduler emulator and the
kubelet-style admitter.

* The vgpu-number allocatable is split × GPUs; at split 2 the scheduler refuses a third 1-GPU pod
  on one GPU, so nothing is admitted beyond the split.
* When a pod the scheduler placed still waits but the kubelet's IDs are exhausted (held by
  something the scheduler does not count), the kubelet refuses the pod itself and never calls the
  plugin; the plugin's Warning Event on that pod names the kubelet-side shortage.
"""

from __future__ import annotations

from vgpu.kube import events as ev
from vgpu.protocol import keys
from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import MEMORY, NODE, NUMBER, UUID0, a100

SPLIT_2 = "nvidia:\n  deviceSplitCount: 2\n"


def _one_gpu_pods(c, count: int) -> None:
    for i in range(count):
        c.create_pod(pod_manifest(f"p{i}", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 1000}}]))


def test_a12_split_2_scheduler_refuses_the_third_pod_nothing_admitted_beyond_the_split(cluster_factory):
    c = cluster_factory([a100(0, UUID0)], device_config=SPLIT_2)
    assert c.node()["status"]["allocatable"][NUMBER] == "2"  # split × GPUs
    assert f"{UUID0},2," in c.node()["metadata"]["annotations"][keys.REGISTER]
    _one_gpu_pods(c, 3)
    out = c.scheduler("master").schedule_once()
    assert [(o.pod.split("/")[-1], o.node) for o in out] == [("p0", NODE), ("p1", NODE), ("p2", None)], out
    assert out[2].reason, out[2]  # refused with a reason, not silently dropped
    assert keys.VGPU_NODE not in c.annotations("p2") and "nodeName" not in c.pod("p2")["spec"]
    results = [c.admit(f"p{i}") for i in range(2)]
    assert [r.error for r in results] == [None, None]
    assert [c.annotations(f"p{i}")[keys.BIND_PHASE] for i in range(2)] == ["success", "success"]
    assert c.admitter.available(NUMBER) == []  # both IDs held, none beyond the split
    # A later cycle still refuses p2: the two admitted pods fill the GPU's split.
    again = c.scheduler("master").schedule_once()
    assert [(o.pod.split("/")[-1], o.node) for o in again] == [("p2", None)]
    assert c.events(ev.REASON_KUBELET_SHORTAGE) == []


def test_a12_event_names_the_kubelet_side_shortage_when_a_candidate_waits(cluster_factory):
    c = cluster_factory([a100(0, UUID0)], device_config=SPLIT_2)
    _one_gpu_pods(c, 2)
    out = c.scheduler("master").schedule_once()
    assert [o.node for o in out] == [NODE, NODE], out
    # The kubelet still holds one of the two IDs for a pod the scheduler no longer counts (e.g. one
    # still terminating): its accounting is tighter than the scheduler's by one ID.
    c.admitter.allocated.setdefault(NUMBER, set()).add(f"{UUID0}-0")
    first = c.admit("p0")
    assert first.admitted, first.error
    assert first.container("c").devices[NUMBER] == [f"{UUID0}-1"]
    # p0's GetPreferredAllocation saw one free ID; p1 waits for one more: the Event is already there.
    evs = c.store.wait_for(
        lambda s: [e for e in s.list("events") if e.get("reason") == ev.REASON_KUBELET_SHORTAGE], 10, "shortage event"
    )
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"]) for e in evs] == [
        ("Pod", "p1", "Warning")
    ]
    msg = evs[0]["message"]
    assert f"kubelet-side shortage of {NUMBER} device IDs on node {NODE}" in msg
    assert "once pod default/p0 is admitted the kubelet has 0 free, but this pod still needs 1" in msg
    assert "advertises 2 healthy of 2 IDs" in msg
    # The kubelet then refuses p1 itself, with the numbers the Event announced.
    second = c.admit("p1")
    assert second.error is not None and "Requested: 1, Available: 0" in second.error
    assert "UnexpectedAdmissionError" not in second.error  # the plugin's Allocate was never called
    assert '"Requested: 1, Available: 0"' in msg
    assert c.annotations("p0")[keys.BIND_PHASE] == "success"
    assert c.annotations("p1")[keys.BIND_PHASE] == "allocating"
    assert c.events(ev.REASON_ALLOCATION_FAILED) == []
    assert c.plugin.proc.poll() is None
