"""The scheduler emulator's driver against the simulated API server over real HTTP, with the
official kubernetes client: handshake writes, PATCH-then-bind (v1.15) vs Binding (master), the
node lock, write failures, and the background loop with a node watch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from vgpu.protocol import RegisterRecord, encode_register, encode_reported, keys
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.scheduler import VolcanoSchedulerEmulator
from vgpu.sim.scheduler.model import SchedulerConfig

U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"
A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"
REGISTER = encode_register(
    [RegisterRecord(U0, 10, 81920, A100, True, "hami-core"), RegisterRecord(U1, 10, 81920, A100, True, "hami-core")]
)
ALLOCATABLE = {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "163840", "volcano.sh/vgpu-cores": "200"}
T0 = 1_787_191_200.0  # 2026-08-20T02:00:00Z


class FakeClock:
    def __init__(self, t: float = T0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def server() -> Iterator[ApiServer]:
    s = ApiServer(bookmark_interval=0.2).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def api(server: ApiServer) -> Iterator[client.CoreV1Api]:
    c = server.api_client()
    try:
        yield client.CoreV1Api(c)
    finally:
        c.close()


def add_node(
    api: client.CoreV1Api,
    name: str = "n1",
    annotations: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
) -> None:
    api.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations or {}}})
    if allocatable:
        api.patch_node_status(name, {"status": {"allocatable": allocatable, "capacity": allocatable}})


def add_pod(
    api: client.CoreV1Api,
    name: str,
    containers: list[dict[str, Any]],
    scheduler: str = "volcano",
    annotations: dict[str, str] | None = None,
) -> None:
    api.create_namespaced_pod(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"schedulerName": scheduler, "containers": containers},
        },
    )


def gpu(name: str, **limits: int) -> dict[str, Any]:
    lim = {f"volcano.sh/vgpu-{k}": str(v) for k, v in limits.items()}
    return {"name": name, "image": "busybox:1.36", "resources": {"limits": lim} if lim else {}}


def worked_example_pod(api: client.CoreV1Api, name: str = "p") -> None:
    add_pod(api, name, [gpu("side"), gpu("c1", number=2, memory=3000, cores=30), gpu("c2", number=1, memory=2000)])


EXPECTED_IDS = f"{U1},NVIDIA,3000,30:{U0},NVIDIA,3000,30:;{U1},NVIDIA,2000,0:"


def test_v1_15_handshake_then_patch_and_bind(server, api):
    add_node(
        api, annotations={keys.REGISTER: REGISTER, keys.HANDSHAKE: encode_reported(datetime.fromtimestamp(T0, UTC))}
    )
    worked_example_pod(api)
    add_pod(api, "other-scheduler", [gpu("c", number=1)], scheduler="default-scheduler")
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version="v1.15"), clock=FakeClock())
    (outcome,) = emu.schedule_once()
    assert outcome.scheduled and outcome.node == "n1", outcome.reason

    node = api.read_node("n1")
    assert node.metadata.annotations[keys.HANDSHAKE] == "Requesting_2026.08.20 02:00:00"
    pod = api.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "n1"
    ann = pod.metadata.annotations
    assert ann[keys.VGPU_IDS_NEW] == ann[keys.DEVICES_TO_ALLOCATE] == EXPECTED_IDS
    assert ann[keys.BIND_PHASE] == "allocating" and ann[keys.VGPU_NODE] == "n1"
    assert ann[keys.VGPU_TIME] == ann[keys.BIND_TIME] == str(int(T0))
    assert api.read_namespaced_pod("other-scheduler", "default").spec.node_name is None

    writes = [
        (r.resource, r.verb, r.content_type)
        for r in server.requests.writes(ok_only=True)
        if r.resource in ("pods", "pods/binding", "nodes")
    ]
    # strategic-merge PATCH of the handshake, then of the pod, then the Binding
    assert [w[:2] for w in writes if not (w[0] in ("pods", "nodes") and w[1] == "create")] == [
        ("nodes", "patch"),
        ("pods", "patch"),
        ("pods/binding", "create"),
    ]
    assert all(ct.startswith("application/strategic-merge-patch+json") for res, verb, ct in writes if verb == "patch")
    assert b"vgpu-ids-new" not in server.requests.writes("pods/binding")[0].body
    c = emu.counters
    assert (c.handshake_requesting, c.pod_patches, c.bindings) == (1, 1, 1)

    # the scheduler's own handshake write is an event: seen within 60 s → no further write
    emu.schedule_once()
    assert emu.counters.handshake_requesting == 1 and emu.counters.node_events == 2


def test_master_carries_annotations_on_the_binding(server, api):
    add_node(api, annotations={keys.REGISTER: REGISTER}, allocatable=ALLOCATABLE)
    worked_example_pod(api)
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version="master"), clock=FakeClock())
    (outcome,) = emu.schedule_once()
    assert outcome.scheduled, outcome.reason
    pod = api.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "n1"
    assert pod.metadata.annotations[keys.VGPU_IDS_NEW] == EXPECTED_IDS
    assert server.requests.writes("pods", "patch") == []
    assert server.requests.writes("nodes") == [r for r in server.requests.writes("nodes") if r.verb == "create"]
    assert b"vgpu-ids-new" in server.requests.writes("pods/binding")[0].body
    c = emu.counters
    assert (c.handshake_writes, c.pod_patches, c.bindings) == (0, 0, 1)


def test_master_without_allocatable_leaves_pod_pending(server, api):
    add_node(api, annotations={keys.REGISTER: REGISTER})
    add_pod(api, "p", [gpu("c", number=1)])
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version="master"), clock=FakeClock())
    (outcome,) = emu.schedule_once()
    assert not outcome.scheduled
    assert "allocatable volcano.sh/vgpu-number" in outcome.node_reasons["n1"]
    assert api.read_namespaced_pod("p", "default").spec.node_name is None
    assert emu.outcomes["default/p"] is outcome


def test_handshake_expiry_with_simulated_time(server, api):
    clock = FakeClock()
    add_node(api, annotations={keys.REGISTER: REGISTER, keys.HANDSHAKE: "Reported x"})
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version="v1.12"), clock=clock)
    emu.sync_nodes()
    assert "n1" in emu.core.nodes
    clock.t += 61
    emu.resync_nodes()  # the next node event more than 60 s after the stamp
    assert api.read_node("n1").metadata.annotations[keys.HANDSHAKE] == "Deleted_2026.08.20 02:01:01"
    assert "n1" not in emu.core.nodes
    add_pod(api, "p", [gpu("c", number=1)])
    (outcome,) = emu.schedule_once()
    assert not outcome.scheduled and "handshake" in outcome.node_reasons["n1"]
    # the plugin answers: a new Reported → Requesting and the pod schedules
    api.patch_node(
        "n1",
        {"metadata": {"annotations": {keys.HANDSHAKE: "Reported y"}}},
        _content_type="application/strategic-merge-patch+json",
    )
    (outcome,) = emu.schedule_once()
    assert outcome.scheduled, outcome.node_reasons
    c = emu.counters
    assert (c.handshake_requesting, c.handshake_deleted, c.observed_handshake_writes) == (2, 1, 1)


def test_node_lock(server, api):
    clock = FakeClock()
    add_node(api, annotations={keys.REGISTER: REGISTER}, allocatable=ALLOCATABLE)
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version="master", node_lock_enable=True), clock=clock)
    add_pod(api, "a", [gpu("c", number=1, memory=100)])
    assert emu.schedule_once()[0].scheduled
    assert api.read_node("n1").metadata.annotations[keys.NODE_LOCK] == "2026-08-20T02:00:00Z"
    assert [r.verb for r in server.requests.writes("nodes")][-1] == "update"  # a full Node Update

    add_pod(api, "b", [gpu("c", number=1, memory=100)])
    clock.t += 120
    (outcome,) = emu.schedule_once()
    assert not outcome.scheduled
    assert outcome.reason == "node n1 locked for b hamivgpu lockname node n1 has been locked within 5 minutes"
    assert emu.core.nodes["n1"].gpus[1].used_num == 1  # master releases b's tentative devices

    clock.t += 181  # > 5 min after the lock: replaced
    (outcome,) = emu.schedule_once()
    assert outcome.scheduled
    assert api.read_node("n1").metadata.annotations[keys.NODE_LOCK] == "2026-08-20T02:05:01Z"

    # the plugin releases the lock → observed; the next pod gets it at once
    api.patch_node(
        "n1",
        {"metadata": {"annotations": {keys.NODE_LOCK: None}}},
        _content_type="application/strategic-merge-patch+json",
    )
    add_pod(api, "c", [gpu("c", number=1, memory=100)])
    assert emu.schedule_once()[0].scheduled
    c = emu.counters
    assert (c.lock_writes, c.lock_refusals, c.observed_lock_releases) == (3, 1, 1)


def test_lock_update_retries_then_succeeds(server, api):
    add_node(api, annotations={keys.REGISTER: REGISTER}, allocatable=ALLOCATABLE)
    emu = VolcanoSchedulerEmulator(
        api, SchedulerConfig(version="v1.15", node_lock_enable=True), clock=FakeClock(), lock_retry_interval=0.01
    )
    api.patch_node(
        "n1",
        {"metadata": {"annotations": {keys.HANDSHAKE: "Reported x"}}},
        _content_type="application/strategic-merge-patch+json",
    )
    server.faults.fail("update", "nodes", status=409, count=3)
    add_pod(api, "a", [gpu("c", number=1)])
    assert emu.schedule_once()[0].scheduled
    assert len(server.requests.writes("nodes", "update")) == 4
    assert keys.NODE_LOCK in api.read_node("n1").metadata.annotations


def test_lock_disabled_before_v1_10(server, api):
    add_node(api, annotations={keys.REGISTER: REGISTER, keys.HANDSHAKE: "Reported x"})
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version="v1.9", node_lock_enable=True), clock=FakeClock())
    add_pod(api, "a", [gpu("c", number=1)])
    assert emu.schedule_once()[0].scheduled
    assert keys.NODE_LOCK not in api.read_node("n1").metadata.annotations


@pytest.mark.parametrize("version, released", [("v1.14", False), ("v1.15", True)])
def test_failed_pod_patch_releases_per_version(server, api, version, released):
    add_node(api, annotations={keys.REGISTER: REGISTER, keys.HANDSHAKE: "Reported x"})
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version=version), clock=FakeClock())
    emu.sync_nodes()
    emu.sync_nodes()  # our Requesting_ write is seen: no further node events from here
    server.faults.fail("patch", "pods", status=500, count=1)
    add_pod(api, "a", [gpu("c", number=1, memory=100)])
    (outcome,) = emu.schedule_once()
    assert not outcome.scheduled and "500" in outcome.reason
    assert emu.counters.write_failures == 1
    assert emu.core.nodes["n1"].gpus[1].used_num == (0 if released else 1)
    assert emu.schedule_once()[0].scheduled  # retried next cycle


def test_background_loop_with_node_watch(server, api):
    add_node(api, annotations={keys.REGISTER: REGISTER, keys.HANDSHAKE: "Reported x"})
    emu = VolcanoSchedulerEmulator(api, SchedulerConfig(version="v1.15"), watch_timeout=1.0)
    emu.start(interval=0.05)
    try:
        add_pod(api, "p", [gpu("c", number=1, memory=100)])
        deadline = time.monotonic() + 10
        while api.read_namespaced_pod("p", "default").spec.node_name is None:
            assert time.monotonic() < deadline, emu.outcomes
            time.sleep(0.02)
        # a plugin write arrives through the watch and is answered with a new Requesting_
        before = emu.counters.handshake_requesting
        api.patch_node(
            "n1",
            {"metadata": {"annotations": {keys.HANDSHAKE: "Reported z"}}},
            _content_type="application/strategic-merge-patch+json",
        )
        while emu.counters.handshake_requesting == before:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert emu.counters.observed_handshake_writes >= 1
    finally:
        emu.stop()
    assert emu._threads == []
