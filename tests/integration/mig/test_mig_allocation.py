"""The plugin's MIG applier over real pod objects and the fake NVML (docs/mig.md §5.2–§5.3;
docs/failures.md G-5, G-6): guards, apply, MIG UUIDs in device order, two GPUs at once."""

from __future__ import annotations

from typing import Any

from vgpu.sim.nvml import fakenvml

from .conftest import A100, H200
from .test_mig_apply import PLANS, check_layout

G = [f"GPU-{i:08x}-6888-5063-1e4d-f2a09cfbf{i:03x}" for i in range(2)]
NUM = "volcano.sh/vgpu-number"


def pod(name: str, ids: str, remaining: str | None = None, phase: str = "allocating") -> dict[str, Any]:
    n = len(ids.split(";"))
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "annotations": {
                "volcano.sh/vgpu-node": "n1",
                "volcano.sh/vgpu-ids-new": ids,
                "volcano.sh/bind-phase": phase,
                "volcano.sh/devices-to-allocate": ids if remaining is None else remaining,
            },
        },
        "spec": {"containers": [{"name": f"c{k}", "resources": {"limits": {NUM: "1"}}} for k in range(n)]},
        "status": {"phase": "Pending"},
    }


def slot(uuid: str, group: str, pos: int) -> str:
    return f"{uuid}[{group}-{pos}],NVIDIA,8000,0:"


def two_gpus(mig_node, second: str = A100):
    return mig_node([fakenvml.device(0), fakenvml.device(1, name=second, memory_total_mib=143771)])


def test_allocation_returns_the_position_mig_uuid(mig_node):
    _, child = mig_node()
    p = pod("p", slot(G[0], "group2", 3))
    out = child.call(f"allocate({p!r}, 0, [{p!r}])")
    assert out == {"uuids": [child.call("lookup(0, 'group2', 3)")["uuid"]]}


def test_two_pods_on_two_gpus_in_different_groups_at_once(mig_node):  # G-6
    _, child = two_gpus(mig_node, H200)
    results = child.call("apply_concurrently([(0, 'group1'), (1, 'group3')])")
    assert all("error" not in r for r in results), results
    assert len(results[0]["devices"]) == 7 and len(results[1]["devices"]) == 2
    assert [g["profile"] for g in child.call("layout(0)")] == ["1g.10gb"] * 7
    assert [(g["profile"], g["start"]) for g in child.call("layout(1)")] == [("3g.71gb", 0), ("3g.71gb", 4)]
    # and through the plugin path: two pods, each on its own GPU, both admitted
    a, b = pod("a", slot(G[0], "group1", 2)), pod("b", slot(G[1], "group3", 1))
    assert child.call(f"allocate({a!r}, 0, [{a!r}, {b!r}])") == {"uuids": [results[0]["devices"][2]["uuid"]]}
    assert child.call(f"allocate({b!r}, 0, [{a!r}, {b!r}])") == {"uuids": [results[1]["devices"][1]["uuid"]]}


def test_one_container_with_two_gpus_gets_uuids_in_device_order(mig_node):
    _, child = two_gpus(mig_node)
    p = pod("p", slot(G[1], "group4", 0) + slot(G[0], "group2", 1))
    out = child.call(f"allocate({p!r}, 0, [{p!r}])")
    assert out["uuids"] == [child.call("lookup(1, 'group4', 0)")["uuid"], child.call("lookup(0, 'group2', 1)")["uuid"]]


def test_unknown_group_or_position_fails_clearly(mig_node):
    _, child = mig_node()
    for ids in (slot(G[0], "group9", 0), slot(G[0], "group2", 4)):
        p = pod("p", ids)
        device_id = ids.split(",")[0]
        assert child.call(f"allocate({p!r}, 0, [{p!r}])") == {"error": f"unknown MIG group/position {device_id}"}
    assert child.call("layout(0)") == []  # nothing was touched


def test_second_container_on_the_same_position_fails(mig_node):  # G-5
    _, child = mig_node()
    ids = slot(G[0], "group1", 0) + ";" + slot(G[0], "group1", 0)
    first = pod("p", ids)
    assert "uuids" in child.call(f"allocate({first!r}, 0, [{first!r}])")
    served = pod("p", ids, remaining=";" + slot(G[0], "group1", 0))
    assert child.call(f"allocate({served!r}, 1, [{served!r}])") == {
        "error": f"MIG position 0 of group group1 on {G[0]} is already assigned"
    }


def test_a_running_pod_of_another_group_blocks_before_nvml_is_touched(mig_node):
    _, child = mig_node()
    running = pod("running", slot(G[0], "group3", 0), phase="success")
    child.call("apply(0, 'group3')")
    before = child.call("layout(0)")
    new = pod("new", slot(G[0], "group1", 0))
    assert child.call(f"allocate({new!r}, 0, [{running!r}, {new!r}])") == {
        "error": f"GPU {G[0]} is in use by MIG group group3"
    }
    assert child.call("layout(0)") == before


def test_in_use_instance_fails_the_allocation_with_the_apply_text(mig_node):
    fake, child = mig_node()
    g1 = child.call("apply(0, 'group1')")
    fake.update_device(
        0,
        processes=[
            {
                "pid": 9,
                "used_memory_mib": 1,
                "gpu_instance_id": g1["devices"][0]["gi"],
                "compute_instance_id": g1["devices"][0]["ci"],
            }
        ],
    )
    p = pod("p", slot(G[0], "group4", 0))  # no pod on this node claims the GPU, but a process runs there
    out = child.call(f"allocate({p!r}, 0, [{p!r}])")
    assert out["error"].startswith(f"MIG instance GI {g1['devices'][0]['gi']} on {G[0]} is in use; not reshaping")
    fake.update_device(0, processes=[])
    check_layout(child, PLANS[A100]["group1"], child.call("apply(0, 'group1')"))


def test_inventory_for_the_monitor(mig_node):
    _, child = two_gpus(mig_node)
    child.call("apply(0, 'group2')")
    child.call("apply(1, 'group1')")
    ids = (
        slot(G[0], "group2", 0)
        + slot(G[1], "group1", 5)
        + ";"
        + slot(G[0], "group2", 3)
        + ";"
        + slot(G[1], "group9", 0)
    )
    child.child.run(f"from vgpu.mig import inventory, slots_of\nrefs = slots_of({ids!r})")
    child.child.run(
        "found = {(i.gpu_uuid, i.group, i.position): i for i in "
        "inventory(node.manager, [(r.uuid, r.group, r.position) for r in refs])}"
    )
    rows = child.child.eval(
        "[(r.container, r.vdevice_index, i.gpu_uuid, i.profile, i.gpu_instance_id, "
        "i.compute_instance_id, i.mig_uuid) for r in refs "
        "for i in [found.get((r.uuid, r.group, r.position))] if i]"
    )
    assert child.child.eval("len(found)") == 3
    expected = []
    for k, i, gpu, group, pos in [(0, 0, 0, "group2", 0), (0, 1, 1, "group1", 5), (1, 0, 0, "group2", 3)]:
        info = child.call(f"lookup({gpu}, {group!r}, {pos})")
        expected.append([k, i, G[gpu], info["profile"], info["gi"], info["ci"], info["uuid"]])
    assert rows == expected  # the unknown group9 slot is skipped
    assert [r[3] for r in rows] == ["2g.20gb", "1g.10gb", "1g.10gb"]
