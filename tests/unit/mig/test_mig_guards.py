"""MIG allocation guards (docs/mig.md §5.2 step 2; docs/failures.md G-5, G-6) over real pod objects. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.scheduler.helpers import ctr, make_core, place, pod
from vgpu.mig import MigGuardError
from vgpu.mig.holdings import check_guards, holdings
from vgpu.protocol import RegisterRecord, consume_segment, decode_pod_devices, encode_register, keys
from vgpu.protocol.pod_model import PodView, ResourceNames, pod_view

NAMES = ResourceNames("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
G0 = "GPU-00000000-6888-5063-1e4d-f2a09cfbf000"
G1 = "GPU-00000001-6888-5063-1e4d-f2a09cfbf001"


def dev(uuid: str, group: str, pos: int, mem: int = 8000) -> str:
    return f"{uuid}[{group}-{pos}],NVIDIA,{mem},0:"


def kube_pod(
    name: str,
    ids: str,
    *,
    remaining: str | None = None,
    phase: str = "allocating",
    containers: int | None = None,
    status: str = "Running",
    node: str = "n1",
) -> PodView:
    n = containers if containers is not None else len(ids.split(";"))
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "annotations": {
                keys.VGPU_NODE: node,
                keys.VGPU_IDS_NEW: ids,
                keys.DEVICES_TO_ALLOCATE: ids if remaining is None else remaining,
                keys.BIND_PHASE: phase,
            },
        },
        "spec": {"containers": [{"name": f"c{k}", "resources": {"limits": {NAMES.count: "1"}}} for k in range(n)]},
        "status": {"phase": status},
    }
    return pod_view(obj, NAMES)


def devices(view: PodView, k: int):
    return decode_pod_devices(view.annotations[keys.VGPU_IDS_NEW])[k]


def test_other_pods_hold_their_whole_assignment():
    other = kube_pod("other", dev(G0, "group1", 0) + ";" + dev(G0, "group1", 1))
    me = kube_pod("me", dev(G0, "group1", 1))
    held = holdings(me, [other, me], "n1")
    assert {(h.uuid, h.group, h.position) for h in held} == {(G0, "group1", 0), (G0, "group1", 1)}
    with pytest.raises(MigGuardError, match=f"MIG position 1 of group group1 on {G0} is already assigned"):
        check_guards(devices(me, 0), held)


def test_a_free_position_of_the_same_group_passes():
    other = kube_pod("other", dev(G0, "group1", 0), phase="success")
    me = kube_pod("me", dev(G0, "group1", 3))
    check_guards(devices(me, 0), holdings(me, [other, me], "n1"))


def test_another_group_on_the_gpu_blocks():
    other = kube_pod("other", dev(G0, "group3", 0), phase="success")
    me = kube_pod("me", dev(G0, "group1", 4))
    with pytest.raises(MigGuardError, match=f"GPU {G0} is in use by MIG group group3"):
        check_guards(devices(me, 0), holdings(me, [other, me], "n1"))


def test_different_gpus_in_different_groups_do_not_interfere():  # G-6
    a = kube_pod("a", dev(G0, "group1", 0), phase="success")
    b = kube_pod("b", dev(G1, "group3", 1))
    check_guards(devices(b, 0), holdings(b, [a, b], "n1"))


@pytest.mark.parametrize("kw", [{"phase": "failed"}, {"status": "Succeeded"}, {"status": "Failed"}, {"node": "n2"}])
def test_dead_failed_or_foreign_pods_hold_nothing(kw):
    other = kube_pod("other", dev(G0, "group3", 0), **kw)
    me = kube_pod("me", dev(G0, "group1", 0))
    assert holdings(me, [other, me], "n1") == []


def test_undecodable_assignments_are_ignored_not_fatal():
    other = kube_pod("other", "garbage")
    me = kube_pod("me", dev(G0, "group1", 0))
    assert holdings(me, [other, me], "n1") == []


def test_only_served_containers_of_the_own_pod_count():
    ids = dev(G0, "group1", 0) + ";" + dev(G1, "group1", 5) + ";" + dev(G0, "group1", 2)
    me = kube_pod("me", ids, remaining=consume_segment(ids, 0))  # container 0 served
    held = holdings(me, [me], "n1")
    assert [(h.uuid, h.position, h.container) for h in held] == [(G0, 0, 0)]


def test_emulator_gives_two_containers_one_position_and_the_second_fails():  # G-5
    recs = [RegisterRecord(G0, 7, 81920, "NVIDIA-NVIDIA A100-SXM4-80GB", True, "mig")]
    core = make_core(nodes={"n1": {keys.REGISTER: encode_register(recs), keys.HANDSHAKE: "Reported x"}})
    plan = place(
        core,
        pod("p", ctr("a", number=1, memory=8000), ctr("b", number=1, memory=8000), annotations={keys.VGPU_MODE: "mig"}),
    )
    ids = plan.annotations[keys.VGPU_IDS_NEW]
    first, second = decode_pod_devices(ids)
    assert first == second and first[0].mig is not None  # the scheduler quirk (docs/mig.md §4)
    before = kube_pod("p", ids)
    check_guards(first, holdings(before, [before], "n1"))  # the first container is fine
    after = kube_pod("p", ids, remaining=consume_segment(ids, 0))
    with pytest.raises(MigGuardError, match=f"MIG position 0 of group group1 on {G0} is already assigned"):
        check_guards(second, holdings(after, [after], "n1"))


def test_one_container_naming_a_slot_twice_fails():
    me = kube_pod("me", dev(G0, "group1", 0) + dev(G0, "group1", 0))
    with pytest.raises(MigGuardError, match="already assigned"):
        check_guards(devices(me, 0), holdings(me, [me], "n1"))
