"""Placement plans (docs/mig.md §6): its plan table, backtracking, infeasible groups. Pure."""

from __future__ import annotations

import time

import pytest

from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES
from vgpu.config.model import MigGroup, MigTemplate
from vgpu.mig import MigConfigError, ProfileCatalog, ProfileInfo, describe, place, plan_group
from vgpu.mig.profiles import STATIC_TABLES, display_name, normalize_name, static_model
from vgpu.nvml.mig_calls import Placement


def catalog(model: str) -> ProfileCatalog:
    """The profile table of docs/mig.md §3 for a model, with the fake's profile ids (any distinct ids do)."""
    return ProfileCatalog(
        tuple(
            ProfileInfo(
                sp.name,
                sp.constant,
                100 + sp.constant,
                _slices(sp.name),
                sp.instances,
                sp.memory_mib,
                sp.placements,
                "static",
            )
            for sp in STATIC_TABLES[model]
        )
    )


def _slices(name: str) -> int:
    return int(name.split("g.", 1)[0])


def group(name: str, *templates: tuple[str, int]) -> MigGroup:
    return MigGroup(name, tuple(MigTemplate(n, 1, c) for n, c in templates))


def shipped(model: str, name: str) -> MigGroup:
    entry = next(e for e in DEFAULT_KNOWN_MIG_GEOMETRIES if model in e.models)
    return next(g for g in entry.groups if g.group == name)


# docs/mig.md §6 "Plan (position: profile@start:size)", verbatim.
SPEC_TABLE = {
    ("A100-SXM4-80GB", "group1"): "0: 1g.10gb@0:1, 1: 1g.10gb@1:1, 2: 1g.10gb@2:1, 3: 1g.10gb@3:1, "
    "4: 1g.10gb@4:1, 5: 1g.10gb@5:1, 6: 1g.10gb@6:1",
    ("A100-SXM4-80GB", "group2"): "0: 2g.20gb@0:2, 1: 2g.20gb@2:2, 2: 2g.20gb@4:2, 3: 1g.10gb@6:1",
    ("A100-SXM4-80GB", "group3"): "0: 3g.40gb@0:4, 1: 3g.40gb@4:4",
    ("A100-SXM4-80GB", "group4"): "0: 7g.80gb@0:8",
    ("A30", "group2"): "0: 2g.12gb@0:2, 1: 2g.12gb@2:2",
}


@pytest.mark.parametrize(("model", "name"), sorted(SPEC_TABLE))
def test_shipped_groups_match_the_spec_plan_table(model, name):
    table = "A30-24GB" if model == "A30" else "A100-80GB"
    plan = plan_group(shipped(model, name), catalog(table))
    assert describe(plan) == SPEC_TABLE[(model, name)]
    assert [i.position for i in plan.instances] == list(range(len(plan)))


def test_every_shipped_group_is_feasible_on_its_model():
    tables = {"A30": "A30-24GB", "A100-SXM4-40GB": "A100-40GB", "A100-SXM4-80GB": "A100-80GB"}
    for entry in DEFAULT_KNOWN_MIG_GEOMETRIES:
        cat = catalog(tables[entry.models[0]])
        for g in entry.groups:
            plan = plan_group(g, cat)
            assert len(plan) == g.positions
            # position k has type t(k): the config order expanded by count
            expected = [t.name for t in g.geometries for _ in range(t.count)]
            assert [i.name for i in plan.instances] == expected


def test_h200_suggested_groups():
    cat = catalog("H200-141GB")
    plan = plan_group(group("group2", ("2g.35gb", 3), ("1g.18gb", 1)), cat)
    assert describe(plan) == "0: 2g.35gb@0:2, 1: 2g.35gb@2:2, 2: 2g.35gb@4:2, 3: 1g.18gb@6:1"
    assert describe(plan_group(group("group4", ("7g.141gb", 1)), cat)) == "0: 7g.141gb@0:8"


def test_backtracking_finds_the_lexicographically_smallest_plan():
    # 2g first would take start 0 greedily; 4g only fits at 0, so the search must back up.
    plan = plan_group(group("g", ("2g.20gb", 1), ("4g.40gb", 1)), catalog("A100-80GB"))
    assert describe(plan) == "0: 2g.20gb@4:2, 1: 4g.40gb@0:4"


def test_plan_keys_are_profile_id_and_start():
    plan = plan_group(group("g", ("3g.40gb", 2)), catalog("A100-80GB"))
    pid = catalog("A100-80GB").by_name("3g.40gb").profile_id
    assert plan.keys == {(pid, 0), (pid, 4)}


def test_unknown_profile_names_the_group_and_the_offer():
    with pytest.raises(MigConfigError, match=r"MIG group groupX: unknown MIG profile 5g\.50gb .*1g\.10gb"):
        plan_group(group("groupX", ("5g.50gb", 1)), catalog("A100-80GB"))


def test_more_instances_than_the_profile_allows():
    with pytest.raises(MigConfigError, match=r"group9 is infeasible: 3 × 3g\.40gb.*at most 2"):
        plan_group(group("group9", ("3g.40gb", 3)), catalog("A100-80GB"))


def test_more_compute_slices_than_the_gpu_has():
    with pytest.raises(MigConfigError, match="8 compute slices, but the GPU has 7"):
        plan_group(group("g", ("4g.40gb", 1), ("2g.20gb", 2)), catalog("A100-80GB"))


def test_overlap_makes_a_group_infeasible():
    # 7 slices of compute, but memory slices overlap: 3g uses 4 memory slices each.
    with pytest.raises(MigConfigError, match="cannot be placed without overlapping"):
        plan_group(group("g", ("3g.40gb", 2), ("1g.10gb", 1)), catalog("A100-80GB"))


def test_empty_group_is_rejected():
    with pytest.raises(MigConfigError, match="no instances"):
        plan_group(MigGroup("g", ()), catalog("A100-80GB"))


def test_search_is_bounded_on_a_large_infeasible_input():
    # 16 one-slice positions over 15 placements each: without remembering dead states the
    # search would try ~15! orders; with it the states are bounded by positions x 2^16.
    one = ProfileInfo("1g.x", 0, 1, 1, 99, 1, tuple(Placement(s, 1) for s in range(15)))
    started = time.perf_counter()
    assert place([one] * 16) is None
    assert time.perf_counter() - started < 5.0
    assert place([one] * 15) == [Placement(s, 1) for s in range(15)]


def test_placement_order_inside_the_profile_list_does_not_matter():
    shuffled = ProfileInfo("2g", 1, 14, 2, 3, 1, (Placement(4, 2), Placement(0, 2), Placement(2, 2)))
    assert place([shuffled, shuffled]) == [Placement(0, 2), Placement(2, 2)]


def test_profile_names_compare_without_mig_prefix_and_case():
    assert display_name("MIG 1g.10gb+me") == "1g.10gb+me"
    assert normalize_name(" mig 2G.20GB ") == "2g.20gb"
    assert catalog("A100-80GB").by_name("MIG 2G.20gb").name == "2g.20gb"


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA H200 141GB HBM3e", "H200-141GB"),
        ("NVIDIA A30", "A30-24GB"),
        ("NVIDIA RTX A3000", None),
        ("Tesla T4", None),
    ],
)
def test_static_model_for_a_name(name, model):
    assert static_model(name) == model


def test_static_tables_follow_the_spec():
    a100 = {sp.name: sp for sp in STATIC_TABLES["A100-40GB"]}
    assert a100["1g.10gb"].constant == 0x9 and a100["1g.10gb"].placements == tuple(
        Placement(s, 2) for s in (0, 2, 4, 6)
    )
    assert a100["7g.40gb"].placements == (Placement(0, 8),) and a100["7g.40gb"].memory_mib == 40192
    a30 = {sp.name: sp for sp in STATIC_TABLES["A30-24GB"]}
    assert a30["2g.12gb+me"].constant == 0x8 and a30["4g.24gb"].placements == (Placement(0, 4),)
    assert {sp.name: sp.memory_mib for sp in STATIC_TABLES["H100-80GB"]}["3g.40gb"] == 40448
