"""Every group of the geometry applies from an empty GPU and from every other group's layout,
and every position maps to the right instance (docs/mig.md §5.2, §6; docs/failures.md G-4)."""

from __future__ import annotations

import pytest

from vgpu.sim.nvml import fakenvml

from .conftest import A100, H200

# docs/mig.md §6 plan table (A100-80GB) and the same shape for the H200 names: (profile, start, size).
PLANS = {
    A100: {
        "group1": [("1g.10gb", s, 1) for s in range(7)],
        "group2": [("2g.20gb", 0, 2), ("2g.20gb", 2, 2), ("2g.20gb", 4, 2), ("1g.10gb", 6, 1)],
        "group3": [("3g.40gb", 0, 4), ("3g.40gb", 4, 4)],
        "group4": [("7g.80gb", 0, 8)],
    },
    H200: {
        "group1": [("1g.18gb", s, 1) for s in range(7)],
        "group2": [("2g.35gb", 0, 2), ("2g.35gb", 2, 2), ("2g.35gb", 4, 2), ("1g.18gb", 6, 1)],
        "group3": [("3g.71gb", 0, 4), ("3g.71gb", 4, 4)],
        "group4": [("7g.141gb", 0, 8)],
    },
}
MEMORY = {A100: 81920, H200: 143771}


def check_layout(child, group_plan, result) -> None:
    """What NVML reports equals the plan, and each position is the instance at its placement."""
    layout = child.call("layout(0)")
    assert sorted((g["profile"], g["start"], g["size"]) for g in layout) == sorted(group_plan)
    assert all(len(g["cis"]) == 1 and g["cis"][0]["full"] for g in layout), layout
    by_start = {g["start"]: g for g in layout}
    migs = {(m["gi"], m["ci"]): m["uuid"] for m in child.call("mig_devices(0)")}
    assert [d["position"] for d in result["devices"]] == list(range(len(group_plan)))
    for d, (profile, start, size) in zip(result["devices"], group_plan, strict=True):
        gi = by_start[start]
        assert (d["profile"], d["start"], d["size"]) == (profile, start, size)
        assert (gi["profile"], gi["gi"], gi["cis"][0]["id"]) == (profile, d["gi"], d["ci"])
        assert migs[(d["gi"], d["ci"])] == d["uuid"] and d["uuid"].startswith("MIG-")
    assert len({d["uuid"] for d in result["devices"]}) == len(group_plan)


@pytest.mark.parametrize("model", [A100, H200])
def test_every_group_from_empty_and_from_every_other_layout(mig_node, model):
    _, child = mig_node([fakenvml.device(0, name=model, memory_total_mib=MEMORY[model])])
    assert child.startup_report["usable"] and not child.startup_report["excluded"]
    assert child.call("plans(0)") == {
        g: ", ".join(f"{k}: {p}@{s}:{z}" for k, (p, s, z) in enumerate(plan)) for g, plan in PLANS[model].items()
    }
    groups = list(PLANS[model])
    for target in groups:
        for source in [None] + [g for g in groups if g != target]:
            child.call("clear(0)")
            kept: dict = {}
            if source is not None:
                before = child.call(f"apply(0, {source!r})")
                assert "error" not in before, before
                kept = {
                    (d["profile"], d["start"]): d["gi"]
                    for d in before["devices"]
                    if (d["profile"], d["start"], d["size"]) in PLANS[model][target]
                }
            result = child.call(f"apply(0, {target!r})")
            assert "error" not in result, (source, target, result)
            check_layout(child, PLANS[model][target], result)
            # instances of the new plan that already existed were kept, not recreated
            now = {(d["profile"], d["start"]): d["gi"] for d in result["devices"]}
            assert all(now[k] == gi for k, gi in kept.items()), (source, target)
            destroyed_positions = [s for s in result["steps"] if s["action"] == "destroy-gi"]
            assert len(destroyed_positions) == len(result["destroyed"])


def test_reapplying_changes_nothing(mig_node):
    _, child = mig_node()
    first = child.call("apply(0, 'group2')")
    second = child.call("apply(0, 'group2')")
    assert second["destroyed"] == [] and second["created"] == [] and second["steps"] == []
    assert second["devices"] == first["devices"]


def test_group_change_keeps_the_shared_instance_and_index_order_is_not_position_order(mig_node):
    _, child = mig_node()
    g2 = child.call("apply(0, 'group2')")
    g1 = child.call("apply(0, 'group1')")
    # group2's 1g.10gb@6 is group1's position 6: kept with its GI id; the rest was replaced
    assert g1["devices"][6]["gi"] == g2["devices"][3]["gi"]
    assert sorted(g1["destroyed"]) == sorted(d["gi"] for d in g2["devices"][:3])
    assert g1["created"] == [0, 1, 2, 3, 4, 5]
    check_layout(child, PLANS[A100]["group1"], g1)
    order = [m["uuid"] for m in child.call("mig_devices(0)")]
    assert order != [d["uuid"] for d in g1["devices"]]  # MIG index ≠ position here


def test_positions_resolve_when_mig_devices_enumerate_in_reverse(mig_node):  # G-4
    _, child = mig_node()
    # Instances made by hand in reverse position order: GI ids (and so the MIG index order)
    # run opposite to the positions.
    for start in reversed(range(7)):
        child.call(f"create_raw(0, '1g.10gb', {start})")
    result = child.call("apply(0, 'group1')")
    assert result["steps"] == [] and result["destroyed"] == [] and result["created"] == []
    check_layout(child, PLANS[A100]["group1"], result)
    by_index = child.call("mig_devices(0)")
    assert [m["uuid"] for m in by_index] == [d["uuid"] for d in reversed(result["devices"])]
    for d in result["devices"]:
        assert child.call(f"lookup(0, 'group1', {d['position']})")["uuid"] == d["uuid"]


def test_lookup_is_read_only_and_skips_what_is_missing(mig_node):
    _, child = mig_node()
    assert child.call("lookup(0, 'group2', 0)") is None  # nothing applied yet
    result = child.call("apply(0, 'group2')")
    assert child.call("lookup(0, 'group2', 3)") == {
        "gi": result["devices"][3]["gi"],
        "ci": result["devices"][3]["ci"],
        "uuid": result["devices"][3]["uuid"],
        "profile": "1g.10gb",
    }
    assert child.call("lookup(0, 'group1', 0)") is None  # group1's 1g@0 does not exist
    assert child.call("lookup(0, 'group1', 6)")["uuid"] == result["devices"][3]["uuid"]  # 1g@6 does
    assert child.call("lookup(0, 'nosuch', 0)") is None
    assert len(child.call("layout(0)")) == 4
