"""docs/failures.md A-12 in process: the plugin names a kubelet-side vgpu-number shortage.

The kubelet refuses a pod itself when it has too few free IDs and never calls the plugin for it;
the plugin sees the shortage in GetPreferredAllocation (the kubelet passes all its free IDs) and
posts a Warning Event on each waiting pod that can no longer fit.
"""

from __future__ import annotations

from vgpu.kube import events as ev
from vgpu.plugin.devices import ResourceKind
from vgpu.protocol import keys

from .conftest import NUMBER, UUIDS, dev, gpu, make_config

N = ResourceKind.NUMBER


def wait_cached(sim, *names: str) -> None:
    """The allocator reads the watch cache: wait (woken by changes) until it holds these pods bound."""

    def ready(cache) -> bool:
        bound = {
            (p["metadata"]["name"])
            for p in cache.items()
            if (p["metadata"].get("annotations") or {}).get(keys.BIND_PHASE) == "allocating"
        }
        return set(names) <= bound

    assert sim.cache.wait_for(ready, 5), names


def shortage_events(sim, name: str | None = None) -> list[dict]:
    return [e for e in sim.events(ev.REASON_KUBELET_SHORTAGE) if name is None or e["involvedObject"]["name"] == name]


def split2_one_gpu(sim_factory):
    return sim_factory([gpu(0)], make_config(device_split_count=2))


def test_waiting_pod_gets_event_when_kubelet_ids_are_exhausted(sim_factory):
    sim = split2_one_gpu(sim_factory)
    assert [i for i, _ in sim.managers[N].devices()] == [f"{UUIDS[0]}-0", f"{UUIDS[0]}-1"]
    sim.schedule("p0", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=100)
    sim.schedule("p1", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=200)
    wait_cached(sim, "p0", "p1")
    # Something the scheduler does not count holds <uuid>-0: the kubelet offers one free ID for p0.
    pref = sim.preferred(1, [f"{UUIDS[0]}-1"])
    assert pref == [f"{UUIDS[0]}-1"]
    evs = shortage_events(sim)
    assert [e["involvedObject"]["name"] for e in evs] == ["p1"]
    e = evs[0]
    assert e["type"] == "Warning" and e["involvedObject"]["kind"] == "Pod"
    assert e["source"]["component"] == ev.COMPONENT
    msg = e["message"]
    assert msg.startswith(f"kubelet-side shortage of {NUMBER} device IDs on node node-1")
    assert "once pod default/p0 is admitted the kubelet has 0 free, but this pod still needs 1" in msg
    assert '"Requested: 1, Available: 0"' in msg and "without calling the device plugin" in msg
    assert "advertises 2 healthy of 2 IDs (deviceSplitCount 2 per GPU" in msg
    # p0 is served as usual; the warned pod is untouched (still allocating, no failure event).
    sim.allocate(N, pref)
    assert sim.annotations("p0")[keys.BIND_PHASE] == "success"
    assert sim.annotations("p1")[keys.BIND_PHASE] == "allocating"
    assert sim.events(ev.REASON_ALLOCATION_FAILED) == []


def test_one_event_per_pod_and_none_while_ids_suffice(sim_factory):
    sim = split2_one_gpu(sim_factory)
    sim.schedule("p0", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=100)
    sim.schedule("p1", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=200)
    wait_cached(sim, "p0", "p1")
    both = [f"{UUIDS[0]}-0", f"{UUIDS[0]}-1"]
    sim.preferred(1, both)  # two free, two pods of one ID each: no shortage
    assert shortage_events(sim) == []
    sim.preferred(1, both[1:])
    sim.preferred(1, both[1:])  # the kubelet asks again: no second event for the same pod
    assert len(shortage_events(sim, "p1")) == 1


def test_multi_container_pod_names_the_container_the_kubelet_refuses(sim_factory):
    sim = sim_factory([gpu(0), gpu(1)], make_config(device_split_count=2))
    sim.schedule("a", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=100)
    sim.schedule(
        "b",
        [{"name": "x", "limits": {NUMBER: 1}}, {"name": "y", "limits": {NUMBER: 2}}],
        [[dev(1)], [dev(0), dev(1)]],
        vgpu_time=200,
    )
    wait_cached(sim, "a", "b")
    # 3 free IDs, a takes 1: b's x fits (1 left), b's y (2) does not.
    sim.preferred(1, [f"{UUIDS[0]}-1", f"{UUIDS[1]}-0", f"{UUIDS[1]}-1"])
    (e,) = shortage_events(sim, "b")
    assert "has 2 free, but this pod still needs 3" in e["message"]
    assert 'at container y ("Requested: 2, Available: 1"' in e["message"]
    assert shortage_events(sim, "a") == []


def test_no_event_without_a_candidate_for_the_call(sim_factory):
    """A call for a pod we do not know fails in Allocate, and the kubelet gets its IDs back."""
    sim = sim_factory([gpu(0), gpu(1)], make_config(device_split_count=2))
    sim.schedule("p1", [{"name": "c", "limits": {NUMBER: 2}}], [[dev(0), dev(1)]], vgpu_time=200)
    wait_cached(sim, "p1")
    # Size 1 with one free ID: p1 (2 IDs) would not fit afterwards, but it is no candidate of this call.
    sim.preferred(1, [f"{UUIDS[0]}-0"])
    assert shortage_events(sim) == []
