"""The MIG slots held on a node and the guards of an allocation (docs/mig.md §5.2 step 2).

Guards (our choice), from the pod cache: every non-terminated pod on this node with
``bind-phase`` ``allocating`` or ``success`` holds the slots of its ``vgpu-ids-new``; for the pod
being allocated only its already served containers count (their ``devices-to-allocate``
segment is empty).  Then

- a slot (GPU, group, position) already held → ``MIG position <pos> of group <g> on <uuid> is
  already assigned`` (docs/failures.md G-5: the scheduler can give two containers of one pod the
  same position);
- a GPU holding live assignments of another group → ``GPU <uuid> is in use by MIG group <other>``.

Both raise :class:`vgpu.mig.errors.MigGuardError`; the applier (:class:`vgpu.mig.node.MigAllocation`)
checks them before it reshapes anything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu.mig.errors import MigGuardError
from vgpu.protocol import ContainerDevice, ProtocolError, decode_pod_devices, keys
from vgpu.protocol.pod_model import PodView

log = logging.getLogger(__name__)

LIVE_PHASES = (keys.BIND_PHASE_ALLOCATING, keys.BIND_PHASE_SUCCESS)


@dataclass(frozen=True)
class Holding:
    """A MIG slot some container holds."""

    uuid: str
    group: str
    position: int
    pod: str  # namespace/name
    container: int  # vGPU container index


def _segments(value: str | None, pod: PodView, annotation: str) -> tuple[tuple[ContainerDevice, ...], ...]:
    if not value:
        return ()
    try:
        return decode_pod_devices(value, annotation=annotation)
    except ProtocolError as exc:
        log.warning("pod %s: %s cannot be decoded, its MIG slots are not considered: %s", pod.key, annotation, exc)
        return ()


def holdings(pod: PodView, node_pods: Iterable[PodView], node_name: str | None = None) -> list[Holding]:
    """The MIG slots held on this node, excluding the unserved containers of ``pod``."""
    out: list[Holding] = []
    for other in node_pods:
        if other.uid == pod.uid or other.terminal or other.bind_phase not in LIVE_PHASES:
            continue
        if node_name and other.vgpu_node not in (None, node_name):
            continue
        for k, segment in enumerate(_segments(other.annotations.get(keys.VGPU_IDS_NEW), other, keys.VGPU_IDS_NEW)):
            out.extend(Holding(d.uuid, d.mig.group, d.mig.position, other.key, k) for d in segment if d.mig)
    assigned = _segments(pod.annotations.get(keys.VGPU_IDS_NEW), pod, keys.VGPU_IDS_NEW)
    remaining = (pod.devices_to_allocate or "").split(";")
    for k, segment in enumerate(assigned):
        served = k < len(remaining) and remaining[k] == ""
        if served:
            out.extend(Holding(d.uuid, d.mig.group, d.mig.position, pod.key, k) for d in segment if d.mig)
    return out


def check_guards(devices: Sequence[ContainerDevice], held: Sequence[Holding]) -> None:
    """Raise ``MigGuardError`` for a slot already held or a GPU held by another group."""
    taken = {(h.uuid, h.group, h.position) for h in held}
    for d in devices:
        assert d.mig is not None
        other = next((h.group for h in held if h.uuid == d.uuid and h.group != d.mig.group), None)
        if other is not None:
            raise MigGuardError(f"GPU {d.uuid} is in use by MIG group {other}")
        key = (d.uuid, d.mig.group, d.mig.position)
        if key in taken:
            raise MigGuardError(f"MIG position {d.mig.position} of group {d.mig.group} on {d.uuid} is already assigned")
        taken.add(key)
