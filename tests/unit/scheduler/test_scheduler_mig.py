"""MIG pick: positions, group stickiness, the factor, quirks, ledger charges.

docs/scheduler-emulator.md §9.4, docs/mig.md §4.
"""

from __future__ import annotations

import pytest

from vgpu.protocol import MigSlot, RegisterRecord, decode_pod_devices, encode_register, keys
from vgpu.sim.scheduler.core import AllocationError

from .helpers import A100, ALLOC, T0, UUIDS, ctr, ids, make_core, place, pod

MIG = {keys.VGPU_MODE: "mig"}


def mig_node(n=1, count=7, mem=81920, typ=A100):
    recs = [RegisterRecord(UUIDS[i], count, mem, typ, True, "mig") for i in range(n)]
    return {keys.REGISTER: encode_register(recs), keys.HANDSHAKE: "Reported x"}


def slots(plan):
    return [[(d.uuid, d.mig, d.usedmem) for d in seg] for seg in decode_pod_devices(ids(plan))]


def test_smallest_fitting_instance_in_first_group():
    core = make_core(nodes={"n1": mig_node()})
    plan = place(core, pod("p", ctr(number=1, memory=8000), annotations=MIG))
    # group1 = 7 × 1g.10gb (9728): position 0; the annotation keeps the requested memory
    assert slots(plan) == [[(UUIDS[0], MigSlot("group1", 0), 8000)]]
    g = core.nodes["n1"].gpus[0]
    assert (g.used_num, g.used_mem) == (1, 9728)  # the ledger charges the instance size
    assert g.mig_usage.index == 0


def test_group_sticks_and_positions_advance():
    core = make_core(nodes={"n1": mig_node()})
    a = place(core, pod("a", ctr(number=1, memory=8000), annotations=MIG))
    b = place(core, pod("b", ctr(number=1, memory=8000), annotations=MIG))
    assert [s[0][0][1] for s in (slots(a), slots(b))] == [MigSlot("group1", 0), MigSlot("group1", 1)]
    # a 2g request does not fit group1 (all 1g): the group sticks, so the pod fails on this GPU
    r = core.filter_and_score(pod("c", ctr(number=1, memory=15000), annotations=MIG), ["n1"])
    assert r.node is None and r.node_reasons["n1"] == "not enough gpu fitted on this node"


def test_big_request_picks_later_group_positions():
    core = make_core(nodes={"n1": mig_node()})
    plan = place(core, pod("p", ctr(number=1, memory=15000), annotations=MIG))
    assert slots(plan)[0][0][1] == MigSlot("group2", 0)  # 2g.20gb, first of the group
    plan = place(core, pod("q", ctr(number=1, memory=5000), annotations=MIG))
    # partly used group2: only types already in use are considered → another 2g.20gb (position 1)
    assert slots(plan)[0][0][1] == MigSlot("group2", 1)


def test_position_counts_types_before_it():
    # v1.14 counts every container in the rebuild (v1.15+ only the first per GPU, case 4)
    core = make_core("v1.14", nodes={"n1": mig_node()})
    # rebuild a ledger where group2's three 2g slots are taken
    busy = pod(
        "busy",
        node="n1",
        annotations={keys.VGPU_IDS_NEW: ";".join(f"{UUIDS[0]}[group2-{i}],NVIDIA,1,0:" for i in range(3))},
    )
    core.sync_pods([busy])
    g = core.nodes["n1"].gpus[0]
    assert g.mig_usage.index == 1 and (g.used_num, g.used_mem) == (3, 3 * 19968)
    # the 1g.10gb type is unused in a partly used group: never picked
    r = core.filter_and_score(pod("p", ctr(number=1, memory=1000), annotations=MIG), ["n1"])
    assert r.node is None


def test_two_containers_of_one_pod_get_the_same_position():
    core = make_core(nodes={"n1": mig_node()})
    plan = place(core, pod("p", ctr("a", number=1, memory=100), ctr("b", number=1, memory=100), annotations=MIG))
    assert [s[0][1] for s in slots(plan)] == [MigSlot("group1", 0), MigSlot("group1", 0)]


@pytest.mark.parametrize(
    "version, slot, charge", [("v1.14", MigSlot("group1", 0), 9728), ("v1.15", MigSlot("group2", 0), 19968 // 2)]
)
def test_gpu_memory_factor_in_mig_pick(version, slot, charge):
    core = make_core(version, gpu_memory_factor=2, nodes={"n1": mig_node(mem=40960)})
    plan = place(core, pod("p", ctr(number=1, memory=6000), annotations=MIG))  # 12000 MiB from v1.15
    assert slots(plan)[0][0][1] == slot
    assert core.nodes["n1"].gpus[0].used_mem == charge


def test_vgpu_number_means_distinct_gpus_in_mig_mode():
    core = make_core(nodes={"n1": mig_node(1)})
    r = core.filter_and_score(pod("p", ctr(number=2, memory=100), annotations=MIG), ["n1"])
    assert r.node_reasons["n1"] == "no enough gpu cards on node n1"
    core = make_core(nodes={"n1": mig_node(2)})
    plan = place(core, pod("p", ctr(number=2, memory=100), annotations=MIG))
    assert sorted(u for u, _, _ in slots(plan)[0]) == UUIDS[:2]


def test_split_count_caps_instances():
    core = make_core(nodes={"n1": mig_node(count=2)})
    for i in range(2):
        place(core, pod(f"p{i}", ctr(number=1, memory=100), annotations=MIG))
    with pytest.raises(AllocationError):
        core.allocate(pod("p2", ctr(number=1, memory=100), annotations=MIG), "n1", T0)


def test_release_keeps_the_group_until_rebuild():
    core = make_core("master", nodes={"n1": mig_node()})
    plan = place(core, pod("p", ctr(number=1, memory=15000), annotations=MIG))
    core.release(plan)
    g = core.nodes["n1"].gpus[0]
    assert g.used_num == 0 and g.mig_usage.usage_list == [] and g.mig_usage.index == 1
    # group2 still sticks: a 1g-sized request gets group2's smallest type, the 1g.10gb at position 3
    plan = place(core, pod("q", ctr(number=1, memory=100), annotations=MIG))
    assert slots(plan)[0][0][1] == MigSlot("group2", 3)
    core.release(plan)
    core.node_event("n1", mig_node(), ALLOC, T0)
    assert core.nodes["n1"].gpus[0].mig_usage.index == -1


def test_ledger_rebuild_from_suffixes_and_bad_ids():
    core = make_core("v1.14", nodes={"n1": mig_node(2)})  # every container counted (case 4 is v1.15+)
    p = pod(
        "p",
        node="n1",
        annotations={
            keys.VGPU_IDS_NEW: (
                f"{UUIDS[0]}[group3-1],NVIDIA,30000,0:{UUIDS[1]},NVIDIA,5,0:;{UUIDS[1]}[group9-0],NVIDIA,5,10:"
                f"{UUIDS[1]}[group1-12],NVIDIA,5,0:"
            )
        },
    )
    core.sync_pods([p])
    g0, g1 = core.nodes["n1"].gpus
    assert (g0.used_num, g0.used_mem, g0.mig_usage.index) == (1, 40192, 2)
    assert [(u.name, u.used_index) for u in g0.mig_usage.usage_list] == [("3g.40gb", [1])]
    # plain id on a MIG GPU: invalid format (skipped); unknown group: counted with 0 memory;
    # position outside the group: skipped
    assert (g1.used_num, g1.used_mem, g1.used_core) == (1, 0, 10)
    assert sum("invalid format" in x or "outside" in x for x in core.problems) == 2


def test_unknown_model_falls_back_to_hami_core():
    core = make_core(nodes={"n1": mig_node(typ="NVIDIA-Tesla T4")})
    plan = place(core, pod("p", ctr(number=1, memory=100)))
    assert slots(plan)[0][0][1] is None
    assert core.filter_and_score(pod("q", ctr(number=1, memory=100), annotations=MIG), ["n1"]).node is None
