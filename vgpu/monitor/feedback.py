"""The priority feedback loop (docs/metrics.md §5): pure planning, then 4-byte pwrites.

Every 5 s, over every tracked, valid, initialised region (mapped to a pod or not):

Pass 1 — for each region c: if ``recent_kernel > 0`` it is decremented; if it is still > 0,
c is *active*: ``active[(u, priority_c)] += 1`` for each valid device uuid u of c, unless c does
not *count* (its pod is unknown, docs/metrics.md §5.1: it is judged but never judges others).

Pass 2 — for each region c with priority p:
  ``higher``  = some device u of c has ``active[(u, q)] > 0`` for some q < p (numerically; any int32);
  ``blocked`` = ``higher`` → ``recent_kernel = -1``; otherwise a negative ``recent_kernel`` becomes 0;
  ``utilization_switch`` = 1 if ``higher`` or some u of c has ``active[(u, p)] > 1``, else 0.

A lower number is a higher priority.  Upstream Volcano indexes a 2-element array by priority,
so only 0 and 1 work there; we compare arbitrary int32 values.

Writes: a field is written only when its final value for this tick differs from what was read.
Pass 1 and pass 2 both act on ``recent_kernel``; we write the value after both passes once
(e.g. ``2 → -1`` instead of ``2 → 1 → -1``).  The bytes in the file after the tick are exactly
those of the two-pass description, with one syscall fewer and no short-lived intermediate value
for libvgpu to observe.  These two int32 fields are the only bytes the monitor ever writes.

The planner takes its inputs as given: which uuids and which priority of a region are trusted is
decided before, by :func:`vgpu.monitor.trust.judge`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)  # the caller's region key, handed back in its writes

RECENT_KERNEL = "recent_kernel"
UTILIZATION_SWITCH = "utilization_switch"


@dataclass(frozen=True, slots=True)
class FeedbackInput(Generic[K]):
    """What one region said this tick."""

    key: K
    recent_kernel: int
    utilization_switch: int
    priority: int  # the trusted priority (the pod's where it states one)
    uuids: tuple[str, ...]  # trusted device uuids: valid, and assigned to the container by its pod
    counts: bool = True  # False: its activity never blocks or crowds another region


@dataclass(frozen=True, slots=True)
class FeedbackWrite(Generic[K]):
    key: K
    field: str  # RECENT_KERNEL or UTILIZATION_SWITCH
    old: int
    new: int


def plan_feedback(regions: Sequence[FeedbackInput[K]]) -> list[FeedbackWrite[K]]:
    """The writes of one tick, recent_kernel before utilization_switch per region."""
    rk_after: list[int] = []
    # uuid -> {priority: active count}
    active: dict[str, dict[int, int]] = {}
    for c in regions:  # pass 1
        rk = c.recent_kernel
        if rk > 0:
            rk -= 1
            if rk > 0 and c.counts:
                for u in c.uuids:
                    per = active.setdefault(u, {})
                    per[c.priority] = per.get(c.priority, 0) + 1
        rk_after.append(rk)

    writes: list[FeedbackWrite[K]] = []
    for c, rk in zip(regions, rk_after, strict=True):  # pass 2
        p = c.priority
        higher = False
        crowded = False
        for u in c.uuids:
            on_gpu = active.get(u)
            if not on_gpu:
                continue
            if not higher and any(q < p and n > 0 for q, n in on_gpu.items()):
                higher = True
            if on_gpu.get(p, 0) > 1:
                crowded = True
        if higher:
            rk = -1
        elif rk < 0:
            rk = 0
        sw = 1 if (higher or crowded) else 0
        if rk != c.recent_kernel:
            writes.append(FeedbackWrite(c.key, RECENT_KERNEL, c.recent_kernel, rk))
        if sw != c.utilization_switch:
            writes.append(FeedbackWrite(c.key, UTILIZATION_SWITCH, c.utilization_switch, sw))
    return writes
