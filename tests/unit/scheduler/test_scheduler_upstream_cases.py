"""The nine upstream decisions the emulator reproduces per version, bugs included.

docs/scheduler-emulator.md §9.9 names each case, the versions it holds in and the upstream file it
comes from; every test asserts the exact ``vgpu-ids-new`` Volcano writes for the same inputs.
"""

from __future__ import annotations

import pytest

from vgpu.protocol import RegisterRecord, encode_register, encode_reported, keys
from vgpu.sim.scheduler.model import ContainerView
from vgpu.sim.scheduler.versions import VERSIONS

from .helpers import A100, ALLOC, T0, UUIDS, bound, ctr, ids, make_core, node_annotations, place, place_in_session, pod

U0, U1 = UUIDS[0], UUIDS[1]
T4 = "NVIDIA-Tesla T4"
MIG = {keys.VGPU_MODE: "mig"}


def since(version: str, first: str) -> bool:
    return VERSIONS.index(version) >= VERSIONS.index(first)


def only(*names: str) -> list[tuple[str, bool]]:
    return [(v, v in names) for v in VERSIONS]


def mig_node(n: int = 1) -> dict[str, str]:
    recs = [RegisterRecord(UUIDS[i], 7, 81920, A100, True, "mig") for i in range(n)]
    return {keys.REGISTER: encode_register(recs), keys.HANDSHAKE: encode_reported(T0)}


# ---- case 1: memory and percentage together -------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_case1_memory_wins_over_percentage_until_v1_13(version):
    core = make_core(version, memory_percentage_name="volcano.sh/vgpu-memory-percentage")
    plan = place(core, pod("p", ctr(number=1, memory=1000, pct=50)))
    used = 40960 if since(version, "v1.14") else 1000
    assert ids(plan) == f"{U1},NVIDIA,{used},0:"


# ---- case 2: the ConfigMap's resource names -------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_case2_builtin_names_until_v1_12(version):
    # The ConfigMap names no percentage resource; v1.9–v1.12 read the built-in one anyway.
    core = make_core(version, memory_percentage_name="")
    plan = place(core, pod("p", ctr(number=1, pct=50)))
    # v1.13+: no percentage read, so the whole card; ≤ v1.12: 50 % with the integer formula is 0 (S-1)
    assert ids(plan) == f"{U1},NVIDIA,{81920 if since(version, 'v1.13') else 0},0:"


@pytest.mark.parametrize("version", VERSIONS)
def test_case2_renamed_count_resource(version):
    renamed = "example.com/vgpu"
    core = make_core(version, count_name=renamed)
    plan = place(core, pod("p", ctr("m", memory=1000), ContainerView("r", {renamed: "1"})))
    # ≤ v1.12 never read the renamed count: only the memory-only container asks for a vGPU
    want = f"{U1},NVIDIA,1000,0:;{U0},NVIDIA,81920,0:" if since(version, "v1.13") else f"{U1},NVIDIA,1000,0:"
    assert ids(plan) == want


# ---- case 3: percentage without memory on mixed cards ---------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_case3_first_cards_memory_reused_until_v1_13(version):
    recs = [
        RegisterRecord(U0, 10, 81920, A100, True, "hami-core"),
        RegisterRecord(U1, 10, 15360, T4, True, "hami-core"),
    ]
    core = make_core(version, nodes={"n1": {keys.REGISTER: encode_register(recs), keys.HANDSHAKE: encode_reported(T0)}})
    plan = place(core, pod("p", ctr(number=2)))  # no memory: 100 % of each card
    a100 = 15360 if not since(version, "v1.14") else 81920
    assert ids(plan) == f"{U1},NVIDIA,15360,0:{U0},NVIDIA,{a100},0:"


# ---- case 4: two containers on one GPU, and the rebuild -------------------------------------


@pytest.mark.parametrize("version, counts_first_only", only("v1.12", "v1.15", "master"))
def test_case4_rebuild_counts_first_container_only(version, counts_first_only):
    core = make_core(version, nodes={"n1": node_annotations(1)})
    two = pod("two", ctr("a", number=1, memory=40960), ctr("b", number=1, memory=40960))
    plan = place(core, two)
    assert ids(plan) == f"{U0},NVIDIA,40960,0:;{U0},NVIDIA,40960,0:"
    core.sync_pods([bound(two, plan)])
    core.node_event("n1", node_annotations(1), ALLOC, T0)  # any node event rebuilds the ledger
    g = core.nodes["n1"].gpus[0]
    assert g.used_mem == (40960 if counts_first_only else 81920)
    extra = core.filter_and_score(pod("extra", ctr(number=1, memory=30720)), ["n1"])
    if counts_first_only:
        plan = place(core, pod("extra", ctr(number=1, memory=30720)))
        assert ids(plan) == f"{U0},NVIDIA,30720,0:"  # 110 GiB committed on an 80 GiB GPU
    else:
        assert extra.node is None and extra.node_reasons["n1"] == "not enough gpu fitted on this node"


# ---- case 5: a vgpu-number 0 container ------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_case5_zero_count_container_charged_from_v1_12(version):
    # c0 asks for no GPU (and so, by default, a whole card's memory); c1 for one whole card.
    core = make_core(version)
    plan = place(core, pod("p", ctr("c0", number=0), ctr("c1", number=1)))
    # index-descending order: c0 is charged GPU 1 from v1.12, so c1 moves to GPU 0
    gpu = U0 if since(version, "v1.12") else U1
    assert ids(plan) == f";{gpu},NVIDIA,81920,0:"


@pytest.mark.parametrize("version", VERSIONS)
def test_case5_zero_count_moves_the_next_container_under_spread(version):
    core = make_core(version, policy="spread")
    plan = place(core, pod("p", ctr("c0", number=0, memory=1000), ctr("c1", number=1, memory=1000)))
    # v1.15+ (spread orders devices): c0 is charged GPU 0 (UsedNum ties go to the lower index), so
    # c1 goes to GPU 1, where a charge-free c0 would have left it on GPU 0. Up to v1.14 the order is
    # index descending: GPU 1 either way (c0's 1000 MiB on GPU 1 leave room).
    gpu = U1
    assert ids(plan) == f";{gpu},NVIDIA,1000,0:"


# ---- case 6: a MIG pod whose second container needs more ------------------------------------


@pytest.mark.parametrize("version", [v for v in VERSIONS if since(v, "v1.12")])
def test_case6_second_container_takes_another_group(version):
    core = make_core(version, nodes={"n1": mig_node()})
    plan = place(
        core, pod("p", ctr("small", number=1, memory=8000), ctr("big", number=1, memory=30000), annotations=MIG)
    )
    assert ids(plan) == f"{U0}[group1-0],NVIDIA,8000,0:;{U0}[group3-0],NVIDIA,30000,0:"


# ---- case 7: pods of one session counted twice ----------------------------------------------


@pytest.mark.parametrize("version, doubled", only("v1.12", "v1.13"))
def test_case7_session_double_count(version, doubled):
    core = make_core(version, nodes={"n1": node_annotations(1)})
    first = place_in_session(core, pod("a", ctr(number=1, memory=30720)))
    assert ids(first) == f"{U0},NVIDIA,30720,0:"
    b = pod("b", ctr(number=1, memory=30720))
    r = core.filter_and_score(b, ["n1"])
    if doubled:
        assert r.node is None  # 2 × 30 GiB seen in this session: no room for 30 GiB more
        core.begin_session()  # a later session sees a once
    plan = place(core, b)
    assert ids(plan) == f"{U0},NVIDIA,30720,0:"


# ---- case 8: two MIG pods in one session ----------------------------------------------------


@pytest.mark.parametrize("version", [v for v in VERSIONS if since(v, "v1.12")])
def test_case8_same_mig_slot_within_a_session_from_v1_14(version):
    core = make_core(version, nodes={"n1": mig_node()})
    a = place_in_session(core, pod("a", ctr(number=1, memory=15000), annotations=MIG))
    b = place_in_session(core, pod("b", ctr(number=1, memory=15000), annotations=MIG))
    assert ids(a) == f"{U0}[group2-0],NVIDIA,15000,0:"
    assert ids(b) == f"{U0}[group2-{0 if since(version, 'v1.14') else 1}],NVIDIA,15000,0:"
    core.begin_session()
    c = place(core, pod("c", ctr(number=1, memory=15000), annotations=MIG))
    assert ids(c) == f"{U0}[group2-{1 if since(version, 'v1.14') else 2}],NVIDIA,15000,0:"


# ---- case 9: mixed modes in one register value ----------------------------------------------


def mixed(last: str) -> dict[str, str]:
    modes = ("hami-core", "mig") if last == "mig" else ("mig", "hami-core")
    recs = [RegisterRecord(UUIDS[i], 7, 81920, A100, True, m) for i, m in enumerate(modes)]
    return {keys.REGISTER: encode_register(recs), keys.HANDSHAKE: encode_reported(T0)}


@pytest.mark.parametrize("version", [v for v in VERSIONS if since(v, "v1.12")])
def test_case9_last_records_mode_for_every_gpu(version):
    # last record mig: both GPUs use the MIG handler; GPU 0 (a hami-core record) has no geometry
    core = make_core(version, nodes={"n1": mixed("mig")})
    r = core.filter_and_score(pod("q", ctr(number=2, memory=1000)), ["n1"])
    assert r.node is None and r.node_reasons["n1"] == "not enough gpu fitted on this node"
    one = place(core, pod("one", ctr(number=1, memory=1000)))
    assert ids(one) == f"{U1}[group1-0],NVIDIA,1000,0:"
    # last record hami-core: the mig GPU is shared as hami-core too (a plain id)
    core = make_core(version, nodes={"n1": mixed("hami-core")})
    plan = place(core, pod("p", ctr(number=2, memory=1000)))
    assert ids(plan) == f"{U1},NVIDIA,1000,0:{U0},NVIDIA,1000,0:"
