"""Allocate for ``UUID[group-pos]`` devices: guards, apply, MIG UUIDs (mig.md §5.2–§5.3).

:class:`MigAllocation` is the ``MigApplier`` of :mod:`vgpu.plugin.allocate`: the Volcano
allocator matches the pod and the container, then hands this class the container's devices;
it returns the MIG UUIDs for ``NVIDIA_VISIBLE_DEVICES`` in the container's device order.

Guards (spec choice, mig.md §5.2 step 2), from the pod cache: every non-terminated pod on this
node with ``bind-phase`` ``allocating`` or ``success`` holds the slots of its ``vgpu-ids-new``;
for the pod being allocated only its already served containers count (their
``devices-to-allocate`` segment is empty).  Then

- a slot (GPU, group, position) already held → ``MIG position <pos> of group <g> on <uuid> is
  already assigned`` (known-failures G-5: the scheduler can give two containers of one pod the
  same position);
- a GPU holding live assignments of another group → ``GPU <uuid> is in use by MIG group <other>``.

Every failure is an :class:`AllocationError` whose text is the one above or the apply's
(``MIG instance GI … is in use; not reshaping``, ``MIG apply failed on …``); the allocator
turns it into the pod Event and ``bind-phase=failed``.  Nothing here can end the process.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu.mig.errors import MigError, MigGuardError
from vgpu.mig.manager import MigManager, slot_id
from vgpu.mig.reconcile import ApplyResult
from vgpu.nvml.errors import NvmlError
from vgpu.plugin.responses import AllocationError
from vgpu.protocol.pod_model import PodView
from vgpu.protocol import ContainerDevice, ProtocolError, decode_pod_devices, keys

log = logging.getLogger(__name__)

LIVE_PHASES = (keys.BIND_PHASE_ALLOCATING, keys.BIND_PHASE_SUCCESS)


@dataclass(frozen=True)
class Holding:
    """A MIG slot some container holds."""

    uuid: str
    group: str
    position: int
    pod: str                  # namespace/name
    container: int            # vGPU container index


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
            raise MigGuardError(f"MIG position {d.mig.position} of group {d.mig.group} on {d.uuid} "
                                "is already assigned")
        taken.add(key)


class MigAllocation:
    """The plugin's MIG applier: guards, then one apply per GPU, then the MIG UUIDs."""

    def __init__(self, manager: MigManager, node_name: str | None = None) -> None:
        self.manager = manager
        self.node_name = node_name

    def apply(self, devices: Sequence[ContainerDevice], pod: PodView, node_pods: Sequence[PodView]) -> list[str]:
        try:
            return [r.device(d.mig.position).mig_uuid  # type: ignore[union-attr]
                    for d, r in zip(devices, self.apply_devices(devices, pod, node_pods))]
        except MigError as exc:
            raise AllocationError(str(exc)) from None
        except NvmlError as exc:
            raise AllocationError(f"MIG apply failed: {exc}") from None

    def apply_devices(self, devices: Sequence[ContainerDevice], pod: PodView,
                      node_pods: Sequence[PodView]) -> list[ApplyResult]:
        """Validate every slot, check the guards, then apply per device (raises ``MigError``)."""
        for d in devices:
            if d.mig is None:
                raise MigGuardError(f"device {d.device_id} has no MIG group/position")
            self.manager.slot(d.uuid, d.mig.group, d.mig.position)  # unknown group/position
        check_guards(devices, holdings(pod, node_pods, self.node_name))
        results = []
        for d in devices:
            assert d.mig is not None
            result = self.manager.apply(d.uuid, d.mig.group)
            log.info("pod %s: %s -> %s", pod.key, slot_id(d.uuid, d.mig.group, d.mig.position),
                     result.device(d.mig.position).mig_uuid)
            results.append(result)
        return results
