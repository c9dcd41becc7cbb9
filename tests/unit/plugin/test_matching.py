"""The pure matching rules of Allocate (docs/protocol.md §5.1–§5.2) on plain pod dicts, no client.

Only rules the in-process allocator tests (tests/unit/kube/test_allocate.py) do not pin down
on their own: pods of other nodes or being deleted, a vgpu-number segment of the wrong size, the
same-GPU rule falling back when it would leave nobody, the tie-breaks of the order, when a call
re-lists, and which device problem is named first.
"""

from __future__ import annotations

from typing import Any

from vgpu.config.model import MODE_HAMI_CORE, MODE_MIG
from vgpu.plugin import matching
from vgpu.protocol import ContainerDevice, MigSlot, encode_pod_devices, keys
from vgpu.protocol.pod_model import PodView, ResourceKind, ResourceNames, pod_view

N, M = ResourceKind.NUMBER, ResourceKind.MEMORY
NODE = "node-1"
NAMES = ResourceNames("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
UUIDS = [f"GPU-{i:08x}-1111-2222-3333-44444444444{i}" for i in range(3)]


def dev(i: int, mem: int = 1000) -> ContainerDevice:
    return ContainerDevice(UUIDS[i], mem, 0)


def view(
    name: str,
    limits: list[dict[str, int]],
    segments: list[list[ContainerDevice]] | None = None,
    *,
    vgpu_time: str = "100",
    node: str = NODE,
    phase: str = keys.BIND_PHASE_ALLOCATING,
    created: str = "2026-01-01T00:00:00Z",
    deleting: bool = False,
    rv: str = "1",
) -> PodView:
    ann = {keys.VGPU_NODE: node, keys.BIND_PHASE: phase, keys.VGPU_TIME: vgpu_time}
    if segments is not None:
        ann[keys.DEVICES_TO_ALLOCATE] = encode_pod_devices(segments)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": created,
        "annotations": ann,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    ctrs = [
        {"name": f"c{i}", "resources": {"limits": {NAMES.name(ResourceKind(k)): str(v) for k, v in lim.items()}}}
        for i, lim in enumerate(limits)
    ]
    return pod_view({"metadata": meta, "spec": {"containers": ctrs}, "status": {}}, NAMES)


def gpu_of(device_id: str) -> str | None:
    return device_id.rsplit("-", 1)[0] if device_id.startswith("GPU-") else None


def names(cands: list[matching.Candidate]) -> list[str]:
    return [c.view.name for c in cands]


def test_only_allocating_pods_of_this_node_not_being_deleted_are_candidates():
    views = [
        view("here", [{"number": 1}], [[dev(0)]]),
        view("elsewhere", [{"number": 1}], [[dev(0)]], node="node-2"),
        view("deleting", [{"number": 1}], [[dev(0)]], deleting=True),
        view("done", [{"number": 1}], [[dev(0)]], phase=keys.BIND_PHASE_SUCCESS),
    ]
    assert names(matching.candidates(views, N, 1, NODE, matching.Journal())) == ["here"]


def test_a_vgpu_number_segment_must_have_exactly_the_requested_devices():
    # limits say 2, but the segment carries one device: not this call's pod (nor any 2-call's).
    v = view("p", [{"number": 2}], [[dev(0)]])
    assert matching.candidates([v], N, 2, NODE, matching.Journal()) == []
    # vgpu-memory as primary (memory-only container): any non-empty segment will do.
    m = view("m", [{"memory": 2000}], [[dev(0, 2000), dev(1, 2000)]])
    (c,) = matching.candidates([m], M, 2000, NODE, matching.Journal())
    assert c.primary and len(c.devices) == 2


def test_malformed_pods_are_reported_with_whether_this_call_meant_them():
    v = view("bad", [{"number": 1}])  # no devices-to-allocate at all
    malformed: list[matching.Malformed] = []
    assert matching.candidates([v], N, 1, NODE, matching.Journal(), malformed) == []
    assert [(m.view.name, m.meant) for m in malformed] == [("bad", True)]
    assert "missing on a pod with bind-phase=allocating" in malformed[0].why
    other: list[matching.Malformed] = []
    matching.candidates([v], N, 2, NODE, matching.Journal(), other)  # a 2-call could not be this pod's
    assert [(m.view.name, m.meant) for m in other] == [("bad", False)]


def test_a_pod_with_an_unusable_limit_is_malformed_and_only_it():
    """Issue 15: one pod's limit (1e1000000) fails that pod, never the call for another one."""
    bad = view("bad", [{"number": 1}], [[dev(0)]])
    raw = dict(bad.raw)
    raw["spec"]["containers"][0]["resources"]["limits"][NAMES.memory] = "1e1000000"
    bad = pod_view(raw, NAMES)
    good = view("good", [{"number": 1}], [[dev(1)]])
    malformed: list[matching.Malformed] = []
    assert names(matching.candidates([bad, good], N, 1, NODE, matching.Journal(), malformed)) == ["good"]
    assert [(m.view.name, m.meant) for m in malformed] == [("bad", True)]
    assert malformed[0].why == (
        'invalid vGPU limit: container c0: limits["volcano.sh/vgpu-memory"] = "1e1000000": out of range (above 2^63-1)'
    )


def test_same_gpu_rule_is_skipped_when_it_would_leave_nobody():
    a = view("a", [{"number": 1}], [[dev(0)]], vgpu_time="200")
    b = view("b", [{"number": 1}], [[dev(1)]], vgpu_time="100")
    cands = matching.candidates([a, b], N, 1, NODE, matching.Journal())
    assert matching.choose(cands, N, [f"{UUIDS[0]}-3"], gpu_of, None).view.name == "a"  # rule 1
    assert matching.choose(cands, N, [f"{UUIDS[2]}-0"], gpu_of, None).view.name == "b"  # nobody: rule 3


def test_order_in_progress_then_vgpu_time_then_creation_then_name():
    def cand(name: str, **kw: Any) -> matching.Candidate:
        v = view(name, [{"number": 1}], [[dev(0)]], **kw)
        return matching.Candidate(v, v.containers[0], True, (dev(0),))

    late = cand("a-late", vgpu_time="300")
    old = cand("z-old", created="2025-01-01T00:00:00Z")
    b, a = cand("b"), cand("a")
    assert names(matching.order([late, b, a, old], None)) == ["z-old", "a", "b", "a-late"]
    assert names(matching.order([late, b, a, old], "uid-a-late")) == ["a-late", "z-old", "a", "b"]


def test_relist_when_nobody_waits_or_the_ids_are_on_other_gpus_but_not_for_the_late_call():
    v = view("p", [{"number": 1, "memory": 1000}], [[dev(0)]])
    journal = matching.Journal()
    cands = matching.candidates([v], N, 1, NODE, journal)
    assert matching.relist(cands, N, [f"{UUIDS[0]}-0"], gpu_of, None) is None
    assert matching.relist(cands, N, [f"{UUIDS[1]}-0"], gpu_of, None) == matching.RELIST_MISMATCH
    assert matching.relist([], N, [f"{UUIDS[0]}-0"], gpu_of, None) == matching.RELIST_NOBODY
    # Served and done: the memory call that follows is recognised (tombstoned) without a LIST.
    journal.of(v).served.add((0, N))
    journal.of(v).tombstoned = True
    late = matching.candidates([v], M, 1000, NODE, journal)
    assert [(c.tombstone, c.primary) for c in late] == [(True, False)]
    assert matching.relist(late, M, ["0-0"], gpu_of, v.uid) is None
    assert matching.relist(late, M, ["0-0"], gpu_of, "uid-someone-else") == matching.RELIST_NOBODY


def test_device_problem_names_the_first_unusable_device():
    gpus = {UUIDS[0]: object(), UUIDS[1]: object()}
    healthy = {UUIDS[0]: True, UUIDS[1]: False}.__getitem__
    assert matching.device_problem([dev(0)], gpus, healthy, MODE_HAMI_CORE) is None
    assert (
        matching.device_problem([dev(0), dev(1)], gpus, healthy, MODE_HAMI_CORE)
        == f"assigned GPU {UUIDS[1]} is unhealthy"
    )
    assert (
        matching.device_problem([dev(2), dev(1)], gpus, healthy, MODE_HAMI_CORE)
        == f"assigned GPU {UUIDS[2]} is not on this node"
    )
    assert matching.device_problem([dev(0)], gpus, healthy, MODE_MIG).startswith(
        "device mode mismatch: node mode is mig, device id is"
    )
    mig = ContainerDevice(UUIDS[0], 1000, 0, MigSlot("group1", 0))
    assert matching.device_problem([mig], gpus, healthy, MODE_MIG) is None
