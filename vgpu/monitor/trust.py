"""What the monitor believes of a region: the plugin's assignment, not the container's claims (docs/metrics.md §5.1).

A container writes its own region, so the GPU UUIDs and the priority in it are claims.  The
monitor judges each region by its pod instead (:class:`vgpu.monitor.pods.PodInfo`):

- **GPUs**: the container's segment of ``vgpu-ids-new`` — the devices Allocate served it.  A
  region device outside that set is not acted on by the feedback loop and not exported; a
  container the pod gives no segment (not a vGPU container, an undecodable value) has none.
- **priority**: the pod spec's ``CUDA_TASK_PRIORITY`` where it states one
  (:func:`vgpu.hamicore.contract.pod_task_priority`); otherwise the region's value, which the pod's
  author controls either way (``envFrom``, the image).
- **unknown pod** (not in the watch yet, or its watch never synced): nothing can be checked, so
  the region is still judged on its own claims — it can be blocked and limited — but its activity
  never counts against any other container.

Each container's mismatches are counted once per reason and logged once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu.monitor.pods import PodInfo

log = logging.getLogger(__name__)

UNASSIGNED_GPU = "unassigned_gpu"
PRIORITY = "priority"
MISMATCH_REASONS = (UNASSIGNED_GPU, PRIORITY)
"""``reason`` values of ``vgpu_monitor_region_mismatches_total`` (each exported from the start, at 0)."""


@dataclass(frozen=True, slots=True)
class Judgement:
    """One region as the feedback loop may use it this tick."""

    uuids: tuple[str, ...]  # devices it is judged on (blocked / limited)
    counts: bool  # its activity may block or crowd others (its pod assigned ``uuids``)
    priority: int
    unassigned: tuple[str, ...] = ()  # claimed devices its pod did not assign
    claimed_priority: int | None = None  # the region's priority, when it differs from the pod's


def judge(pod: PodInfo | None, container: str, uuids: Sequence[str], region_priority: int) -> Judgement:
    """The trusted view of a region with device ``uuids`` and ``region_priority`` (see the module doc)."""
    if pod is None:
        return Judgement(tuple(uuids), False, region_priority)
    assigned = pod.assigned_gpus(container)
    kept = tuple(u for u in uuids if u in assigned)
    unassigned = tuple(u for u in uuids if u not in assigned)
    prio = pod.priorities.get(container)
    if prio is None:
        return Judgement(kept, True, region_priority, unassigned)
    return Judgement(kept, True, prio, unassigned, None if prio == region_priority else region_priority)


def exported_uuids(pod: PodInfo | None, container: str) -> frozenset[str] | None:
    """The device UUIDs a container's series may carry; None: any (its pod is unknown, exported by UID)."""
    return None if pod is None else pod.assigned_gpus(container)


class MismatchLedger:
    """Counts each container's mismatches once per reason and logs them once (loop thread only)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()  # (directory name, reason)

    def record(self, dir_name: str, pod: PodInfo, container: str, j: Judgement) -> list[str]:
        """The reasons first seen now for this container directory (to be counted)."""
        new: list[str] = []
        who = f"pod {pod.namespace}/{pod.name} container {container} ({dir_name})"
        if j.unassigned and (dir_name, UNASSIGNED_GPU) not in self._seen:
            self._seen.add((dir_name, UNASSIGNED_GPU))
            new.append(UNASSIGNED_GPU)
            assigned = ", ".join(sorted(pod.assigned_gpus(container))) or "none"
            log.warning(
                "%s: its region claims GPU %s, which vgpu-ids-new does not assign to it (assigned: %s); "
                "the monitor ignores that device for feedback and metrics",
                who,
                ", ".join(j.unassigned),
                assigned,
            )
        if j.claimed_priority is not None and (dir_name, PRIORITY) not in self._seen:
            self._seen.add((dir_name, PRIORITY))
            new.append(PRIORITY)
            log.warning(
                "%s: its region claims priority %d but the pod sets CUDA_TASK_PRIORITY=%d; the feedback loop uses %d",
                who,
                j.claimed_priority,
                j.priority,
                j.priority,
            )
        return new

    def prune(self, live: Iterable[str]) -> None:
        """Forget directories no longer tracked (a new directory of the same name is logged anew)."""
        keep = set(live)
        self._seen = {k for k in self._seen if k[0] in keep}
