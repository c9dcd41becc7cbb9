"""The feedback loop on real region files: offsets and scenarios of docs/metrics.md §5; no other byte is written."""

from __future__ import annotations

import struct

import pytest

from vgpu.sim.hamicore.writer import RegionWriter
from vgpu.sim.pods import StaticPods

from .helpers import UUIDS, add_container, new_uid, one, parse, pod, region_bytes

# (utilization_switch offset) per layout, from the table in docs/metrics.md §5; rk = +4.
SWITCH_OFFSET = {"original": 804_668, "v0": 1_197_884, "v1.1": 2_008_900, "v1.2": 2_008_900, "interim": 2_008_932}


def feedback_fields(path, variant):
    """(utilization_switch, recent_kernel, priority) read straight from the offsets of docs/metrics.md §5."""
    with open(path, "rb") as f:
        f.seek(SWITCH_OFFSET[variant])
        return struct.unpack("<iii", f.read(12))


def only_feedback_bytes_differ(before: bytes, after: bytes, variant: str) -> None:
    assert len(before) == len(after)
    off = SWITCH_OFFSET[variant]
    assert before[:off] == after[:off]
    assert before[off + 8 :] == after[off + 8 :]


@pytest.mark.parametrize("variant", list(SWITCH_OFFSET))
def test_priority_0_and_1_on_one_gpu_every_layout(make_monitor, hook, variant):
    hi_uid, lo_uid = new_uid(), new_uid()
    hi = add_container(hook, hi_uid, "main", variant=variant, priority=0, procs=[(1, [100, 0])])
    lo = add_container(hook, lo_uid, "main", variant=variant, priority=1, procs=[(2, [100, 0])])
    before = {p: region_bytes(p) for p in (hi, lo)}
    assert feedback_fields(hi, variant) == (1, 2, 0)  # as libvgpu initialises them
    m = make_monitor(StaticPods([pod(hi_uid, "hi", gpus={"main": UUIDS}), pod(lo_uid, "lo", gpus={"main": UUIDS})]))
    m.tick()
    assert feedback_fields(hi, variant) == (0, 1, 0)  # not limited, still "active"
    assert feedback_fields(lo, variant) == (1, -1, 1)  # limited and blocked
    for p in (hi, lo):
        only_feedback_bytes_differ(before[p], region_bytes(p), variant)
    m.tick()  # hi's countdown ends: lo is released
    assert feedback_fields(hi, variant) == (0, 0, 0)
    assert feedback_fields(lo, variant) == (0, 0, 1)
    for p in (hi, lo):
        only_feedback_bytes_differ(before[p], region_bytes(p), variant)


def test_two_tasks_of_equal_priority(make_monitor, hook):
    a_uid, b_uid = new_uid(), new_uid()
    a = add_container(hook, a_uid, "main", priority=1, procs=[(1, [10, 10])])
    b = add_container(hook, b_uid, "main", priority=1, uuids=[UUIDS[1]], procs=[(2, [10])], limits_mib=[10])
    m = make_monitor(StaticPods([pod(a_uid, "a", gpus={"main": UUIDS}), pod(b_uid, "b", gpus={"main": [UUIDS[1]]})]))
    writes = m.tick().writes
    assert feedback_fields(a, "v1.2") == (1, 1, 1)
    assert feedback_fields(b, "v1.2") == (1, 1, 1)
    # rk 2 -> 1 written on both; the switch was already 1: not rewritten
    assert sorted((w.field, w.old, w.new) for w in writes) == [("recent_kernel", 2, 1)] * 2


def test_relaunch_keeps_the_lower_priority_blocked(make_monitor, hook):
    hi_uid = new_uid()
    hi_dir = hook / "containers" / f"{hi_uid}_main"
    lo_uid = new_uid()
    hi = add_container(hook, hi_uid, "main", priority=0, procs=[(1, [10, 0])])
    lo = add_container(hook, lo_uid, "main", priority=1, procs=[(2, [10, 0])])
    m = make_monitor(StaticPods([pod(hi_uid, "hi", gpus={"main": UUIDS}), pod(lo_uid, "lo", gpus={"main": UUIDS})]))
    m.tick()
    for _ in range(3):  # hi keeps launching kernels between ticks: lo stays blocked
        w = RegionWriter.create(hi, "v1.2", env={})
        w.kernel_launch()
        w.close()
        m.tick()
        assert feedback_fields(lo, "v1.2")[:2] == (1, -1)
    assert hi_dir.is_dir()


INT32_MIN = -(2**31)


def test_a_claimed_gpu_is_not_acted_on_and_an_unknown_pod_blocks_nobody(make_monitor, hook):
    # docs/metrics.md §5.1: only the GPUs of the container's vgpu-ids-new segment count.
    victim_uid, attacker_uid, ghost_uid, lo_uid = new_uid(), new_uid(), new_uid(), new_uid()
    victim = add_container(hook, victim_uid, "main", priority=1, uuids=[UUIDS[0]], procs=[(1, [10])], limits_mib=[10])
    attacker = add_container(hook, attacker_uid, "main", priority=INT32_MIN, procs=[(2, [10, 10])])
    ghost = add_container(hook, ghost_uid, "main", priority=INT32_MIN, uuids=[UUIDS[0]], limits_mib=[10])
    lo = add_container(hook, lo_uid, "main", priority=7, uuids=[UUIDS[1]], procs=[(3, [10])], limits_mib=[10])
    pods = [
        pod(victim_uid, "victim", gpus={"main": [UUIDS[0]]}),
        pod(attacker_uid, "attacker", gpus={"main": [UUIDS[1]]}),  # the region also claims UUIDS[0]
        pod(lo_uid, "lo", gpus={"main": [UUIDS[1]]}),
    ]
    m = make_monitor(StaticPods(pods))  # the ghost's pod is not in the watch
    m.tick()
    assert feedback_fields(victim, "v1.2") == (0, 1, 1)  # alone on UUIDS[0] among those that count
    assert feedback_fields(lo, "v1.2") == (1, -1, 7)  # the attacker IS on UUIDS[1] at a higher priority
    assert feedback_fields(attacker, "v1.2") == (0, 1, INT32_MIN)
    assert feedback_fields(ghost, "v1.2") == (0, 1, INT32_MIN)  # judged on its claims: nothing above it
    s = parse(m.render_metrics())
    assert {lab["reason"]: v for lab, v in s["vgpu_monitor_region_mismatches_total"]} == {
        "unassigned_gpu": 1.0,
        "priority": 0.0,
    }
    m.tick()
    m.tick()  # counted once per container, not per tick
    assert one(parse(m.render_metrics()), "vgpu_monitor_region_mismatches_total", reason="unassigned_gpu") == 1


def test_the_pods_priority_wins_over_the_regions(make_monitor, hook, caplog):
    a_uid, b_uid = new_uid(), new_uid()
    a = add_container(hook, a_uid, "main", priority=0, uuids=[UUIDS[0]], procs=[(1, [10])], limits_mib=[10])
    b = add_container(hook, b_uid, "main", priority=1, uuids=[UUIDS[0]], procs=[(2, [10])], limits_mib=[10])
    pods = [
        pod(a_uid, "a", gpus={"main": [UUIDS[0]]}, env={"main": {"CUDA_TASK_PRIORITY": "1"}}),  # region says 0
        pod(b_uid, "b", gpus={"main": [UUIDS[0]]}, env={"main": {"CUDA_TASK_PRIORITY": "1"}}),
    ]
    m = make_monitor(StaticPods(pods))
    with caplog.at_level("WARNING", logger="vgpu.monitor.trust"):
        m.tick()
        m.tick()
    assert feedback_fields(b, "v1.2")[:2] != (1, -1)  # equal priorities by the pods: nobody is blocked
    assert feedback_fields(a, "v1.2")[2] == 0  # the region itself is never rewritten
    assert one(parse(m.render_metrics()), "vgpu_monitor_region_mismatches_total", reason="priority") == 1
    msgs = [r.getMessage() for r in caplog.records if "claims priority" in r.getMessage()]
    assert len(msgs) == 1 and "default/a container main" in msgs[0] and "CUDA_TASK_PRIORITY=1" in msgs[0]
