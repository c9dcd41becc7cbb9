"""Busy instances, NVML errors and crashes during an apply (docs/failures.md G-2, G-3; issue 7).

- a busy instance blocks a reshape with a clear error and nothing is destroyed;
- an injected error rolls back what the apply created and the process keeps working;
- a process killed between steps (e.g. between GPU- and compute-instance creation) leaves a
  state that the next run — a new process — converges from.
"""

from __future__ import annotations

import pytest

from tests.integration.nvml.conftest import ChildError
from vgpu.nvml import errors

from .conftest import A100
from .test_mig_apply import PLANS, check_layout

UUID0 = "GPU-00000000-6888-5063-1e4d-f2a09cfbf000"


def place_process(fake, gi: int, ci: int = 0, pid: int = 4242) -> None:
    fake.update_device(
        0, processes=[{"pid": pid, "used_memory_mib": 1024, "gpu_instance_id": gi, "compute_instance_id": ci}]
    )


def test_busy_instance_blocks_a_reshape_and_nothing_is_destroyed(mig_node):  # G-3
    fake, child = mig_node()
    g1 = child.call("apply(0, 'group1')")
    before = child.call("layout(0)")
    busy = g1["devices"][3]["gi"]
    place_process(fake, busy, g1["devices"][3]["ci"])
    result = child.call("apply(0, 'group2')")
    assert result["error"] == "MigInUseError"
    assert result["message"].startswith(f"MIG instance GI {busy} on {UUID0} is in use; not reshaping")
    assert result["steps"] == []
    assert child.call("layout(0)") == before  # every instance still there, same ids
    # once the process is gone the same reshape goes through
    fake.update_device(0, processes=[])
    check_layout(child, PLANS[A100]["group2"], child.call("apply(0, 'group2')"))


def test_a_busy_instance_that_the_new_plan_keeps_does_not_block(mig_node):
    fake, child = mig_node()
    g2 = child.call("apply(0, 'group2')")
    keep = g2["devices"][3]  # 1g.10gb@6 is also group1's position 6
    place_process(fake, keep["gi"], keep["ci"])
    g1 = child.call("apply(0, 'group1')")
    assert "error" not in g1, g1
    assert g1["devices"][6]["gi"] == keep["gi"] and g1["devices"][6]["uuid"] == keep["uuid"]
    assert keep["gi"] not in g1["destroyed"]
    check_layout(child, PLANS[A100]["group1"], g1)


def test_a_whole_gpu_process_blocks_every_destroy(mig_node):
    fake, child = mig_node()
    g3 = child.call("apply(0, 'group3')")
    fake.update_device(0, processes=[{"pid": 7, "used_memory_mib": 10}])
    result = child.call("apply(0, 'group4')")
    assert result["error"] == "MigInUseError" and "outside MIG instances" in result["message"]
    assert [g["gi"] for g in child.call("layout(0)")] == [d["gi"] for d in g3["devices"]]


def test_in_use_answered_by_nvml_itself_is_a_clear_failure(mig_node):
    # The process check cannot see everything (a process may start right after it): NVML's
    # own IN_USE on destroy fails the apply with the same text and nothing is created.
    fake, child = mig_node()
    child.call("apply(0, 'group4')")
    fake.inject_error("nvmlComputeInstanceDestroy", errors.NVML_ERROR_IN_USE)
    result = child.call("apply(0, 'group1')")
    assert result["error"] == "MigInUseError"
    assert result["message"].startswith(f"MIG instance GI 1 on {UUID0} is in use; not reshaping")
    assert [(g["profile"], len(g["cis"])) for g in child.call("layout(0)")] == [("7g.80gb", 1)]


@pytest.mark.parametrize("source", [None, "group2"])
def test_insufficient_resources_rolls_back_what_this_apply_created(mig_node, source):  # G-2
    fake, child = mig_node()
    kept = None
    if source:
        kept = child.call(f"apply(0, {source!r})")["devices"][3]  # 1g@6, part of group1's plan
    # the 4th GPU-instance creation and everything after it fails
    result = child.call(
        "apply(0, 'group1', inject_at=('create-ci', 3, "
        f"'nvmlDeviceCreateGpuInstanceWithPlacement', {errors.NVML_ERROR_INSUFFICIENT_RESOURCES}))"
    )
    assert result["error"] == "MigApplyError"
    assert result["message"].startswith(f"MIG apply failed on {UUID0}: nvmlDeviceCreateGpuInstanceWithPlacement")
    assert "NVML_ERROR_INSUFFICIENT_RESOURCES" in result["message"]
    created = [s for s in result["steps"] if s["action"] in ("create-gi", "create-ci")]
    rolled = [s for s in result["steps"] if s["action"].startswith("rollback")]
    assert len(created) == 6 and len(rolled) == 6
    assert {(s["gi"], s["ci"]) for s in rolled} == {(s["gi"], s["ci"]) for s in created}
    layout = child.call("layout(0)")
    if kept is None:
        assert layout == []
    else:  # the instance that existed before this apply (and belongs to the plan) is untouched
        assert [(g["gi"], g["profile"], g["start"], g["cis"][0]["id"]) for g in layout] == [
            (kept["gi"], "1g.10gb", 6, kept["ci"])
        ]
    # the same process keeps working: clear the fault and the apply converges
    fake.clear_error("nvmlDeviceCreateGpuInstanceWithPlacement")
    check_layout(child, PLANS[A100]["group1"], child.call("apply(0, 'group1')"))


@pytest.mark.parametrize("kill_at", [("create-gi", 1), ("create-gi", 4), ("create-ci", 3)])
def test_crash_during_apply_converges_on_restart(mig_node, kill_at):
    fake, child = mig_node()
    with pytest.raises((ChildError, RuntimeError), match="child exited"):
        child.call(f"apply(0, 'group2', kill_at={kill_at!r})")
    left = child.child.proc.wait(timeout=10)
    assert left == -9  # killed, not a clean exit
    half = mig_node.restart(fake).call("layout(0)")
    orphans = [g for g in half if not g["cis"]]
    if kill_at[0] == "create-gi":
        assert len(orphans) == 1  # the GI whose CI was never made
    restarted = mig_node.restart(fake)
    assert restarted.call("layout(0)") == half  # startup leaves existing instances alone
    result = restarted.call("apply(0, 'group2')")
    check_layout(restarted, PLANS[A100]["group2"], result)
    assert result["destroyed"] == []  # nothing needed replacing
    kept = {g["gi"] for g in half}
    assert kept <= {d["gi"] for d in result["devices"]}  # half-made instances were completed, not redone


def test_crash_between_destroy_steps_converges_to_either_layout(mig_node):
    fake, child = mig_node()
    child.call("apply(0, 'group1')")
    with pytest.raises((ChildError, RuntimeError), match="child exited"):
        child.call("apply(0, 'group3', kill_at=('destroy-gi', 2))")
    restarted = mig_node.restart(fake)
    assert len(restarted.call("layout(0)")) == 5  # two of seven GIs were gone
    check_layout(restarted, PLANS[A100]["group1"], restarted.call("apply(0, 'group1')"))
    check_layout(restarted, PLANS[A100]["group3"], restarted.call("apply(0, 'group3')"))


def test_crash_leaves_an_orphan_that_another_group_removes(mig_node):
    fake, child = mig_node()
    with pytest.raises((ChildError, RuntimeError), match="child exited"):
        child.call("apply(0, 'group1', kill_at=('create-gi', 1))")
    restarted = mig_node.restart(fake)
    orphan = restarted.call("layout(0)")
    assert [(g["profile"], g["start"], g["cis"]) for g in orphan] == [("1g.10gb", 0, [])]
    result = restarted.call("apply(0, 'group4')")
    assert result["destroyed"] == [orphan[0]["gi"]]
    check_layout(restarted, PLANS[A100]["group4"], result)
