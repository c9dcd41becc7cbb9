"""Fit, score and Allocate, the worked example and the S table.

docs/protocol.md §4 and §6 (the worked example), docs/scheduler-emulator.md §9.2, §9.3, §9.5.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from vgpu.protocol import ContainerDevice, decode_pod_devices, keys
from vgpu.sim.scheduler.core import AllocationError
from vgpu.sim.scheduler.fit import fit_pod, node_order_score, pod_requests, quantity_as_int64
from vgpu.sim.scheduler.model import ContainerRequest, SchedulerConfig
from vgpu.sim.scheduler.versions import VERSIONS

from .helpers import (
    ALLOC,
    MEM,
    T0,
    UUIDS,
    bound,
    ctr,
    ids,
    make_core,
    node_annotations,
    place,
    pod,
)

U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"


def devices(plan):
    return [[(d.uuid, d.usedmem, d.usedcores) for d in seg] for seg in decode_pod_devices(ids(plan))]


def test_worked_example_section_6():
    """docs/protocol.md §6: master, hami-core, factor 1, no policy."""
    core = make_core("master", nodes={"n1": node_annotations(2, uuids=[U0, U1])})
    p = pod("p", ctr("side"), ctr("c1", number=2, memory=3000, cores=30), ctr("c2", number=1, memory=2000))
    plan = place(core, p)
    assert ids(plan) == (f"{U1},NVIDIA,3000,30:{U0},NVIDIA,3000,30:;{U1},NVIDIA,2000,0:")
    a = plan.annotations
    assert a[keys.DEVICES_TO_ALLOCATE] == a[keys.VGPU_IDS_NEW]
    assert a[keys.VGPU_NODE] == "n1" and a[keys.BIND_PHASE] == "allocating"
    assert a[keys.VGPU_TIME] == a[keys.BIND_TIME] == str(int(T0.timestamp()))
    g0, g1 = core.nodes["n1"].gpus
    assert (g1.used_num, g1.used_mem, g1.used_core) == (2, 5000, 30)
    assert (g0.used_num, g0.used_mem, g0.used_core) == (1, 3000, 30)


def test_request_extraction():
    cfg = SchedulerConfig()
    p = pod(
        "p",
        ctr("cores-only", cores=50),
        ctr("mem-only", memory=2000),
        ctr("count-only", number=2),
        ctr("req", number=1, requests={MEM: "100", "volcano.sh/vgpu-cores": "20"}),
    )
    assert pod_requests(p, cfg) == [
        ContainerRequest(nums=1, memreq=2000, mem_percentage=101, coresreq=0),
        ContainerRequest(nums=2, memreq=0, mem_percentage=100, coresreq=0),  # omitted memory = whole card
        ContainerRequest(nums=1, memreq=100, mem_percentage=101, coresreq=20),
    ]
    assert quantity_as_int64("1k") == 1000 and quantity_as_int64("1.5") is None and quantity_as_int64("x") is None


def test_pod_without_vgpu_fits_everywhere_with_score_0():
    core = make_core()
    p = pod("p", ctr("a", cores=10))
    chosen = core.filter_and_score(p, ["n1", "n2-without-devices"])
    assert chosen.node == "n1" and chosen.scores == {"n1": 0, "n2-without-devices": 0}
    assert core.allocate(p, "n1", T0).annotations == {}


def test_a10_more_gpus_than_the_node_has():
    core = make_core(nodes={"n1": node_annotations(1)})
    chosen = core.filter_and_score(pod("p", ctr(number=2)), ["n1"])
    assert chosen.node is None
    assert chosen.node_reasons == {"n1": "no enough gpu cards on node n1"}


def test_node_without_devices_is_not_a_candidate_for_vgpu_pods():
    core = make_core()
    chosen = core.filter_and_score(pod("p"), ["n0"])
    assert chosen.node is None and "not initialized" in chosen.node_reasons["n0"]


def test_a12_split_count_caps_tasks():
    core = make_core(nodes={"n1": node_annotations(1, count=2)})
    for i in range(2):
        place(core, pod(f"p{i}", ctr(number=1, memory=100)))
    assert core.filter_and_score(pod("p2", ctr(number=1, memory=100)), ["n1"]).node_reasons == {
        "n1": "not enough gpu fitted on this node"
    }


@pytest.mark.parametrize(
    "first, second, fits",
    [
        (dict(memory=80000), dict(memory=2000), False),  # memory
        (dict(memory=100, cores=60), dict(memory=100, cores=50), False),  # cores > 100
        (dict(memory=100, cores=10), dict(memory=100, cores=100), False),  # exclusive needs an empty card
        (dict(memory=100, cores=100), dict(memory=100), False),  # a full card takes no cores=0 task
        (dict(memory=100, cores=50), dict(memory=100, cores=50), True),
    ],
)
def test_per_card_rules(first, second, fits):
    core = make_core(nodes={"n1": node_annotations(1)})
    place(core, pod("a", ctr(number=1, **first)))
    assert (core.filter_and_score(pod("b", ctr(number=1, **second)), ["n1"]).node is not None) is fits


def test_count_only_needs_untouched_memory():
    core = make_core(nodes={"n1": node_annotations(1)})
    place(core, pod("a", ctr(number=1, memory=1)))
    assert core.filter_and_score(pod("b", ctr(number=1)), ["n1"]).node is None


@pytest.mark.parametrize(
    "ann, fits",
    [
        ({keys.USE_GPUTYPE: "a100"}, True),
        ({keys.USE_GPUTYPE: "T4,V100"}, False),
        ({keys.USE_GPUTYPE: "T4,A100", keys.NOUSE_GPUTYPE: "A100"}, True),  # use wins
        ({keys.NOUSE_GPUTYPE: "T4,a100"}, False),
        ({keys.NOUSE_GPUTYPE: "T4,V100"}, True),
        ({keys.NOUSE_GPUTYPE: "A100"}, False),
    ],
)
def test_gputype_filters(ann, fits):
    core = make_core()
    assert (core.filter_and_score(pod("p", annotations=ann), ["n1"]).node is not None) is fits


def test_card_type_must_contain_nvidia():
    core = make_core(nodes={"n1": node_annotations(1, typ="NVIDIA-x")})
    assert core.filter_and_score(pod("p"), ["n1"]).node == "n1"
    core = make_core(nodes={"n1": {keys.REGISTER: f"{UUIDS[0]},10,100,AMD-MI300,true,hami-core:"}})
    assert core.filter_and_score(pod("p"), ["n1"]).node is None


def test_vgpu_mode_filter():
    core = make_core()
    r = core.filter_and_score(pod("p", annotations={keys.VGPU_MODE: "mig"}), ["n1"])
    assert r.node_reasons["n1"] == "pod required sharing mode mig is not the same as the node mode hami-core"
    assert core.filter_and_score(pod("p", annotations={keys.VGPU_MODE: "hami-core"}), ["n1"]).node == "n1"
    old = make_core("v1.11")  # no mode filter before v1.12
    assert old.filter_and_score(pod("p", annotations={keys.VGPU_MODE: "mps"}), ["n1"]).node == "n1"


def test_c4_uuid_allow_deny_master_only():
    core = make_core(nodes={"n1": node_annotations(2)})
    ann = {keys.USE_GPUUUID: f" {UUIDS[0]} , {UUIDS[1]}", keys.NOUSE_GPUUUID: UUIDS[1]}
    plan = place(core, pod("p", ctr(number=1, memory=10), annotations=ann))
    assert devices(plan) == [[(UUIDS[0], 10, 0)]]  # deny wins over allow for GPU 1
    r = core.filter_and_score(pod("q", annotations={keys.USE_GPUUUID: "GPU-nope"}), ["n1"])
    assert r.node_reasons["n1"] == (
        'no GPU matches UUID constraints volcano.sh/vgpu-use-gpuuuid="GPU-nope", '
        'volcano.sh/vgpu-nouse-gpuuuid="" on node n1'
    )
    old = make_core("v1.15")
    assert old.filter_and_score(pod("q", annotations={keys.USE_GPUUUID: "GPU-nope"}), ["n1"]).node == "n1"


# ---- the S table (docs/failures.md): one test per row ----


@pytest.mark.parametrize("version, expected", [("v1.13", 0), ("v1.14", 40960)])
def test_s1_percentage_int_division_until_v1_13(version, expected):
    core = make_core(version, memory_percentage_name="volcano.sh/vgpu-memory-percentage")
    plan = place(core, pod("p", ctr(number=1, pct=50)))
    assert devices(plan)[0][0][1] == expected


@pytest.mark.parametrize("version, reads_pct", [("v1.12", True), ("v1.13", False)])
def test_percentage_name_when_configmap_absent(version, reads_pct):
    core = make_core(version)  # memory_percentage_name=None: no ConfigMap
    plan = place(core, pod("p", ctr(number=1, pct=50)))
    # v1.12 reads the percentage (int-div: 50 % → 0); v1.13 never does (no memory → whole card)
    assert devices(plan)[0][0][1] == (0 if reads_pct else 81920)


@pytest.mark.parametrize("version, fits", [("v1.9", True), ("v1.10", False)])
def test_s2_unsigned_memory_underflow_in_v1_9(version, fits):
    core = make_core(version, nodes={"n1": node_annotations(1, mem=1000)})
    # a bound pod charged more than the card has (e.g. the register shrank after a restart)
    over = pod("over", node="n1", annotations={keys.VGPU_IDS_NEW: f"{UUIDS[0]},NVIDIA,1500,0:"})
    core.sync_pods([over])
    assert core.nodes["n1"].gpus[0].used_mem == 1500
    assert (core.filter_and_score(pod("p", ctr(number=1, memory=100)), ["n1"]).node is not None) is fits


@pytest.mark.parametrize("version, same_gpu", [("v1.14", True), ("v1.15", False), ("master", False)])
def test_s4_podgroup_spread(version, same_gpu):
    core = make_core(version)
    ann = {keys.PODGROUP_POLICY: "spread", "scheduling.k8s.io/group-name": "job1"}
    a = place(core, pod("a", ctr(number=1, memory=100), annotations=ann))
    b = place(core, pod("b", ctr(number=1, memory=100), annotations=ann))
    assert (devices(a)[0][0][0] == devices(b)[0][0][0]) is same_gpu
    # another group is not affected
    c = place(
        core,
        pod(
            "c",
            ctr(number=1, memory=100),
            annotations={keys.PODGROUP_POLICY: "spread", "scheduling.k8s.io/group-name": "job2"},
        ),
    )
    assert devices(c)[0][0][0] == UUIDS[1]


@pytest.mark.parametrize("version, expected_gpu", [("v1.14", 1), ("v1.15", 0)])
def test_s5_policy_drives_device_order_from_v1_15(version, expected_gpu):
    core = make_core(version, policy="binpack")
    busy = pod("busy", node="n1", annotations={keys.VGPU_IDS_NEW: f"{UUIDS[0]},NVIDIA,5000,0:"})
    core.sync_pods([busy])
    plan = place(core, pod("p", ctr(number=1, memory=100)))
    assert devices(plan)[0][0][0] == UUIDS[expected_gpu]


def test_spread_policy_order_v1_15():
    core = make_core("v1.15", policy="spread", nodes={"n1": node_annotations(3)})
    busy = pod("busy", node="n1", annotations={keys.VGPU_IDS_NEW: f"{UUIDS[0]},NVIDIA,1,0:"})
    core.sync_pods([busy])
    plan = place(core, pod("p", ctr(number=2, memory=100)))
    assert [d[0] for d in devices(plan)[0]] == [UUIDS[1], UUIDS[2]]  # UsedNum ascending, ties to lower index


@pytest.mark.parametrize("version, fits", [("v1.11", True), ("v1.12", False)])
def test_s7_single_value_nouse_gputype(version, fits):
    core = make_core(version)
    r = core.filter_and_score(pod("p", annotations={keys.NOUSE_GPUTYPE: "A100"}), ["n1"])
    assert (r.node is not None) is fits


@pytest.mark.parametrize("version, score", [("v1.13", 100), ("v1.14", 100), ("v1.15", 0), ("master", 0)])
def test_s8_spread_score(version, score):
    core = make_core(version, policy="spread", weight=1)
    assert core.filter_and_score(pod("p", ctr(number=1, memory=100)), ["n1"]).score == score


def test_binpack_score_and_weight():
    core = make_core(
        "master",
        policy="binpack",
        weight=2,
        nodes={"n1": node_annotations(1, mem=1000), "n2": node_annotations(1, mem=1000)},
    )
    busy = pod("busy", node="n2", annotations={keys.VGPU_IDS_NEW: f"{UUIDS[0]},NVIDIA,500,0:"})
    core.sync_pods([busy])
    r = core.filter_and_score(pod("p", ctr(number=1, memory=250)), ["n1", "n2"])
    assert r.scores == {"n1": 2 * 25, "n2": 2 * 75} and r.node == "n2"
    cfg = SchedulerConfig(version="v1.12", weight=5)
    assert node_order_score(99.0, cfg) == 0
    assert node_order_score(24.5, SchedulerConfig(weight=1)) == 25
    assert node_order_score(24.4, SchedulerConfig(weight=0)) == 0


@pytest.mark.parametrize("version, leaked", [("v1.14", True), ("v1.15", False)])
def test_rollback_of_a_partly_fitted_container(version, leaked):
    core = make_core(version, nodes={"n1": node_annotations(2, count=1)})
    core.sync_pods([pod("busy", node="n1", annotations={keys.VGPU_IDS_NEW: f"{UUIDS[0]},NVIDIA,1,0:"})])
    with pytest.raises(AllocationError, match="not enough gpu fitted"):
        core.allocate(pod("p", ctr(number=2, memory=10)), "n1", T0)
    g1 = core.nodes["n1"].gpus[1]
    assert (g1.used_num, g1.used_mem) == ((1, 10) if leaked else (0, 0))


@pytest.mark.parametrize("version", VERSIONS)
def test_release_per_version(version):
    core = make_core(version)
    plan = place(core, pod("p", ctr(number=1, memory=300, cores=20)))
    core.release(plan)
    g = core.nodes["n1"].gpus[1]
    if version in ("v1.15", "master"):
        assert (g.used_num, g.used_mem, g.used_core) == (0, 0, 0) and not g.pod_map
    else:
        assert (g.used_num, g.used_mem, g.used_core) == (1, 300, 20)  # no-op until the next node event
        core.node_event("n1", node_annotations(), ALLOC, T0)
        g = core.nodes["n1"].gpus[1]
        assert (g.used_num, g.used_mem, g.used_core) == (0, 0, 0)


def test_ledger_follows_pods_and_is_idempotent():
    core = make_core()
    p = pod("p", ctr(number=1, memory=300, cores=20))
    plan = place(core, p)
    g = core.nodes["n1"].gpus[1]
    assert (g.used_num, g.used_mem) == (1, 300)
    core.sync_pods([bound(p, plan)])
    core.sync_pods([bound(p, plan)])
    assert (g.used_num, g.used_mem) == (1, 300)
    # a node event rebuilds from the bound pod: same numbers
    core.node_event("n1", node_annotations(), ALLOC, T0)
    g = core.nodes["n1"].gpus[1]
    assert (g.used_num, g.used_mem, g.used_core) == (1, 300, 20)
    # terminated → given back
    core.sync_pods([replace(bound(p, plan), phase="Succeeded")])
    assert (g.used_num, g.used_mem, g.used_core) == (0, 0, 0)


def test_ledger_matches_uuid_by_substring_and_skips_junk():
    core = make_core()
    junk = pod(
        "j", node="n1", annotations={keys.VGPU_IDS_NEW: f"x{UUIDS[0]}y,NVIDIA,7,1:bad,NVIDIA:;GPU-zz,NVIDIA,1,1:"}
    )
    core.sync_pods([junk])
    g0, g1 = core.nodes["n1"].gpus
    assert (g0.used_num, g0.used_mem, g0.used_core) == (1, 7, 1) and g1.used_num == 0
    assert any("has 2 fields" in p for p in core.problems)


def test_in_flight_allocation_survives_a_node_event():
    """The lock write or the scheduler's own handshake patch triggers a node event between
    Allocate and the bind becoming visible; the allocation must stay charged."""
    core = make_core()
    p = pod("p", ctr(number=1, memory=300))
    place(core, p)
    core.node_event("n1", node_annotations(), ALLOC, T0)
    assert core.nodes["n1"].gpus[1].used_mem == 300
    core.sync_pods([p])  # still pending in the list
    assert core.nodes["n1"].gpus[1].used_mem == 300


def test_fit_on_snapshot_does_not_touch_live_ledger():
    core = make_core()
    node = core.nodes["n1"]
    fit_pod(pod("p", ctr(number=2, memory=5)), node.snapshot(), core.config, order_policy="", score_policy="")
    assert all(g.used_num == 0 for g in node.gpus)
    assert core.allocate(pod("p", ctr(number=2, memory=5)), "n1", T0).charges
    assert all(g.used_num == 1 for g in node.gpus)


def test_multi_container_and_zero_count_container():
    core = make_core(nodes={"n1": node_annotations(2)})
    plan = place(core, pod("p", ctr("a", number=1, memory=5), ctr("b", number=0, memory=5), ctr("c", memory=7)))
    assert [len(s) for s in decode_pod_devices(ids(plan))] == [1, 0, 1]
    assert ids(plan).count(";") == 2


def test_allocate_on_unknown_node():
    core = make_core()
    with pytest.raises(AllocationError, match="not initialized"):
        core.allocate(pod("p"), "nowhere", T0)


def test_best_node_wins_and_ties_go_to_first_name():
    core = make_core(nodes={"b": node_annotations(1), "a": node_annotations(1)})
    assert core.filter_and_score(pod("p"), ["b", "a"]).node == "a"


def test_container_device_type_is_literal_nvidia():
    core = make_core()
    plan = place(core, pod("p", ctr(number=1, memory=1)))
    assert decode_pod_devices(ids(plan))[0][0] == ContainerDevice(UUIDS[1], 1, 0)
    assert ",NVIDIA,1,0:" in ids(plan)


@pytest.mark.parametrize(
    "version, expected",
    [
        ("v1.12", {}),
        ("v1.13", {"volcano.sh/vgpu-memory": 2 * 3000 * 1000.0, "volcano.sh/vgpu-cores": 2 * 30 * 1000.0}),
        ("master", {"volcano.sh/vgpu-memory": 2 * 3000 * 1000.0, "volcano.sh/vgpu-cores": 2 * 30 * 1000.0}),
    ],
)
def test_s3_queue_accounting_in_milli_units_from_v1_13(version, expected):
    core = make_core(version)
    p = pod("p", ctr(number=2, memory=3000, cores=30))
    plan = place(core, p)
    assert core.queue_resources(bound(p, plan)) == expected
