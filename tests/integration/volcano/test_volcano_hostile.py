"""Hostile pods against the real ``vgpu plugin`` (issue 15: one tenant's input affects only itself).

- A pod with a vGPU limit no node can satisfy (``1e1000000``, a 5,000-digit number) sits on the
  node: Allocate and GetPreferredAllocation keep working for every other pod; the bad pod is
  never a candidate, and the plugin log names it and the limit (docs/protocol.md §7).
- The same pod being admitted fails on its own, with a ``VGPUAllocationFailed`` Event naming the
  limit.
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from vgpu.protocol import ContainerDevice, keys, scheduler_allocation
from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import MEMORY, NODE, NUMBER, UUID0, Cluster

HUGE = "1e1000000"
DIGITS = "9" * 5000


def _hostile_pod(c: Cluster, name: str, limits: dict[str, Any], *, allocating: bool) -> dict[str, Any]:
    """A pod on this node (spec.nodeName) with ``limits``; ``allocating``: as the scheduler left it."""
    manifest = pod_manifest(name, [{"name": "c", "limits": limits}])
    manifest["spec"]["nodeName"] = NODE
    if allocating:
        devices = [[ContainerDevice(UUID0, 1000, 0)]]
        manifest["metadata"]["annotations"] = scheduler_allocation(NODE, devices, time.time() - 60)
    return c.create_pod(manifest)


def _schedule_and_admit(c: Cluster, name: str) -> None:
    c.create_pod(pod_manifest(name, [{"name": "c", "limits": {NUMBER: 1, MEMORY: 2000}}]))
    out = c.scheduler("master").schedule_once()
    assert [o.node for o in out if o.pod.endswith(name)] == [NODE], out
    res = c.admit(name)
    assert res.admitted, res.error
    assert c.annotations(name)[keys.BIND_PHASE] == "success"


def test_out_of_range_limits_on_the_node_leave_other_pods_admitted(cluster):
    _hostile_pod(cluster, "huge", {NUMBER: HUGE}, allocating=False)
    _hostile_pod(cluster, "digits", {NUMBER: 1, MEMORY: DIGITS}, allocating=True)
    number = cluster.kubelet.plugin(NUMBER)
    assert number is not None
    ids = number.healthy_ids()
    # GetPreferredAllocation never fails, even with such pods on the node.
    assert len(number.get_preferred_allocation(ids, [], 1)) == 1
    _schedule_and_admit(cluster, "good")
    log = cluster.plugin.log()
    assert "default/huge" in log and HUGE in log, log[-3000:]
    assert "default/digits" in log
    assert "INTERNAL" not in log and "Traceback" not in log, log[-3000:]


def test_the_pod_with_the_bad_limit_fails_alone_with_an_event_naming_it(cluster):
    _hostile_pod(cluster, "bad", {NUMBER: 1, MEMORY: HUGE}, allocating=True)
    number = cluster.kubelet.plugin(NUMBER)
    assert number is not None
    try:
        number.allocate([number.healthy_ids()[:1]])
        raise AssertionError("Allocate for the pod with the bad limit succeeded")
    except grpc.RpcError as exc:
        assert exc.code() is not grpc.StatusCode.INTERNAL, exc.details()
        assert MEMORY in exc.details() and HUGE in exc.details(), exc.details()
    assert cluster.annotations("bad")[keys.BIND_PHASE] == "failed"
    events = [e for e in cluster.events("VGPUAllocationFailed") if e["involvedObject"]["name"] == "bad"]
    assert len(events) == 1, events
    assert MEMORY in events[0]["message"] and HUGE in events[0]["message"], events[0]["message"]
    _schedule_and_admit(cluster, "good")


SPURIOUS = 300


def test_spurious_allocates_aggregate_into_one_event_with_a_count(cluster):
    number = cluster.kubelet.plugin(NUMBER)
    assert number is not None
    ids = number.healthy_ids()[:1]
    for _ in range(SPURIOUS):
        try:
            number.allocate([ids])
        except grpc.RpcError as exc:
            assert "cannot get valid pod" in (exc.details() or ""), exc.details()
        else:
            raise AssertionError("a spurious Allocate succeeded")
    events = cluster.events("VGPUNoPendingPod")
    assert len(events) == 1, [(e["metadata"]["name"], e.get("count")) for e in events]
    ev = events[0]
    assert ev["count"] == SPURIOUS, ev
    assert ev["involvedObject"]["kind"] == "Node" and ev["involvedObject"]["name"] == NODE
    assert ev["lastTimestamp"] >= ev["firstTimestamp"]
