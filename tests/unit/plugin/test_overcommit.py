"""The over-commit guard's trust rules and message (docs/decisions.md decision 11).

End to end against the scheduler emulator: tests/integration/scheduler/test_scheduler_overcommit.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from vgpu.plugin.overcommit import OvercommitGuard
from vgpu.protocol import ContainerDevice, keys
from vgpu.protocol.pod_model import PodView, ResourceNames, pod_view

NODE = "n1"
U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"
NAMES = ResourceNames("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
CAP = 81920


def view(name: str, ids: str, phase: str = "success", *, node: str = NODE, rv: str = "1", **extra: Any) -> PodView:
    meta: dict[str, Any] = {
        "creationTimestamp": extra.get("created", "2026-01-01T00:00:00Z"),
        "name": name,
        "namespace": extra.get("ns", "default"),
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "annotations": {keys.VGPU_IDS_NEW: ids, keys.BIND_PHASE: phase, keys.VGPU_NODE: node},
    }
    if extra.get("deleting"):
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    n = extra.get("containers", ids.count(";") + 1)
    ctrs = [{"name": f"c{i}", "resources": {"limits": {NAMES.count: "1"}}} for i in range(n)]
    return pod_view(
        {
            "metadata": meta,
            "spec": {"nodeName": NODE, "containers": ctrs},
            "status": {"phase": extra.get("status", "Running")},
        },
        NAMES,
    )


def ask(mem: int, cores: int = 0, uuid: str = U0) -> list[ContainerDevice]:
    return [ContainerDevice(uuid, mem, cores)]


def check(guard: OvercommitGuard, views: list[PodView], serving: PodView, devices, index: int = 0) -> str | None:
    return guard.problem([*views, serving], serving, index, "c", devices, lambda _u: CAP, 1)


NEW = view("new", f"{U0},NVIDIA,30720,0:", "allocating")


def test_success_pods_count_every_container():
    g = OvercommitGuard(NODE)
    two = view("two", f"{U0},NVIDIA,40960,0:;{U0},NVIDIA,40960,0:")
    msg = check(g, [two], NEW, ask(30720))
    assert msg == (
        f"GPU {U0} would be over-committed: 81920 of its 81920 MiB memory and 0 of its 100 % cores are "
        "already assigned (default/two); container c asks 30720 MiB and 0 % — the scheduler's accounting is wrong"
    )
    assert check(g, [two], NEW, ask(30720, uuid=U1)) is None  # the other GPU is free


def test_cores_over_100_refused():
    g = OvercommitGuard(NODE)
    busy = view("busy", f"{U0},NVIDIA,1000,80:")
    assert check(g, [busy], NEW, ask(1000, 20)) is None
    assert "80 of its 100 % cores" in (check(g, [busy], NEW, ask(1000, 30)) or "")


def test_only_what_the_plugin_assigned_counts():
    g = OvercommitGuard(NODE)
    others = [
        view("waiting", f"{U0},NVIDIA,81920,0:", "allocating"),  # not served yet: its own Allocate counts us
        view("failed", f"{U0},NVIDIA,81920,0:", "failed"),
        view("done", f"{U0},NVIDIA,81920,0:", status="Succeeded"),
        view("leaving", f"{U0},NVIDIA,81920,0:", deleting=True),
        view("elsewhere", f"{U0},NVIDIA,81920,0:", node="n2"),
        view("junk", "not a device list"),
    ]
    assert check(g, others, NEW, ask(30720)) is None


def test_what_this_process_served_wins_over_later_annotations():
    g = OvercommitGuard(NODE)
    g.granted("uid-a", ask(40960))
    # the annotation was edited after the plugin served it: the guard keeps what it handed out
    tampered = view("a", f"{U0},NVIDIA,1,0:", "allocating", rv="7")
    assert "40960 of its" in (check(g, [tampered], NEW, ask(50000)) or "")
    inflated = view("a", f"{U0},NVIDIA,81920,0:", rv="8")
    assert check(g, [inflated], NEW, ask(30720)) is None


def test_the_pods_own_other_containers_count():
    g = OvercommitGuard(NODE)
    own = view("own", f"{U0},NVIDIA,50000,0:;{U0},NVIDIA,40000,0:", "allocating")
    msg = check(g, [], own, ask(40000), index=1)
    assert msg is not None and "50000 of its 81920" in msg and "default/own (its other containers)" in msg


def test_mig_devices_are_not_checked():
    from vgpu.protocol import MigSlot

    g = OvercommitGuard(NODE)
    two = view("two", f"{U0},NVIDIA,81920,0:")
    assert check(g, [two], NEW, [ContainerDevice(U0, 30720, 0, MigSlot("group1", 0))]) is None


def test_success_pods_this_process_did_not_serve_count_only_from_before_its_start():
    g = OvercommitGuard(NODE, started=datetime(2026, 6, 1, tzinfo=UTC))
    before = view("before", f"{U0},NVIDIA,81920,0:", created="2026-05-31T23:59:59Z")
    after = view("after", f"{U0},NVIDIA,81920,0:", created="2026-06-01T00:00:00Z")  # hand-written annotations
    assert check(g, [after], NEW, ask(30720)) is None
    assert "81920 of its" in (check(g, [before], NEW, ask(30720)) or "")
    # a pod that asks for no vGPU, or whose segments do not match its vGPU containers, never counts
    for n in (0, 2):
        odd = view(f"odd{n}", f"{U0},NVIDIA,81920,0:", created="2026-05-31T00:00:00Z", containers=n)
        assert check(g, [odd], NEW, ask(30720)) is None


def test_the_event_names_only_pods_of_the_failing_pods_namespace():
    g = OvercommitGuard(NODE)
    others = [view(f"t{i}", f"{U0},NVIDIA,20000,0:", ns="tenant-b") for i in range(2)]
    mine = [view(f"m{i}", f"{U0},NVIDIA,5000,0:") for i in range(5)]
    msg = check(g, others + mine, NEW, ask(30720)) or ""
    assert "(default/m0, default/m1, default/m2, 2 more, 2 pod(s) of other namespaces)" in msg
    assert "tenant-b" not in msg


def test_holders_keep_a_served_pod_whose_annotations_no_longer_name_the_gpu():
    """The allocator reads only the pods the GPU index names plus :meth:`holders`: a tenant who
    rewrites its served pod's ``vgpu-ids-new`` still holds what it was served."""
    g = OvercommitGuard(NODE)
    served = view("served", f"{U0},NVIDIA,61440,0:", "allocating")
    g.granted(served.uid, ask(61440))
    assert g.holders([U0]) == {served.uid} and g.holders([U1]) == set()
    edited = view("served", f"{U1},NVIDIA,1,0:", "success", rv="2")
    alive = {edited.uid, NEW.uid}
    msg = g.problem([edited, NEW], NEW, 0, "c", ask(30720), lambda _u: CAP, 1, alive=alive)
    assert msg is not None and "61440 of its 81920 MiB" in msg
    # once the pod leaves the node it no longer counts (its grant is dropped at the next trim)
    assert g.problem([NEW], NEW, 0, "c", ask(30720), lambda _u: CAP, 1, alive={NEW.uid}) is None
