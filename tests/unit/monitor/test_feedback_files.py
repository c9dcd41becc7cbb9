"""The feedback loop on real region files: offsets and scenarios of docs/metrics.md §5; no other byte is written."""

from __future__ import annotations

import struct

import pytest

from vgpu.sim.hamicore.writer import RegionWriter
from vgpu.sim.pods import StaticPods

from .helpers import UUIDS, add_container, new_uid, pod, region_bytes

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
    m = make_monitor(StaticPods([pod(hi_uid, "hi"), pod(lo_uid, "lo")]))
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
    a = add_container(hook, new_uid(), "main", priority=1, procs=[(1, [10, 10])])
    b = add_container(hook, new_uid(), "main", priority=1, uuids=[UUIDS[1]], procs=[(2, [10])], limits_mib=[10])
    m = make_monitor()  # unmapped pods take part too (docs/metrics.md §5 input)
    writes = m.tick().writes
    assert feedback_fields(a, "v1.2") == (1, 1, 1)
    assert feedback_fields(b, "v1.2") == (1, 1, 1)
    # rk 2 -> 1 written on both; the switch was already 1: not rewritten
    assert sorted((w.field, w.old, w.new) for w in writes) == [("recent_kernel", 2, 1)] * 2


def test_relaunch_keeps_the_lower_priority_blocked(make_monitor, hook):
    hi_uid = new_uid()
    hi_dir = hook / "containers" / f"{hi_uid}_main"
    hi = add_container(hook, hi_uid, "main", priority=0, procs=[(1, [10, 0])])
    lo = add_container(hook, new_uid(), "main", priority=1, procs=[(2, [10, 0])])
    m = make_monitor()
    m.tick()
    for _ in range(3):  # hi keeps launching kernels between ticks: lo stays blocked
        w = RegionWriter.create(hi, "v1.2", env={})
        w.kernel_launch()
        w.close()
        m.tick()
        assert feedback_fields(lo, "v1.2")[:2] == (1, -1)
    assert hi_dir.is_dir()
