"""The MIG seam of Allocate (docs/mig.md §5): what the allocator asks of MIG, and MIG failures as its errors.

:mod:`vgpu.mig` knows nothing of the plugin; it raises :class:`vgpu.mig.errors.MigError` with the
user-facing text.  :func:`mig_visible_devices` is the one place that turns a MIG failure into the
:class:`AllocationError` the allocator reports (pod Event, ``bind-phase=failed``, gRPC status).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from vgpu.mig.errors import MigError
from vgpu.plugin.responses import REASON_MIG, AllocationError
from vgpu.protocol import ContainerDevice
from vgpu.protocol.pod_model import PodView


class MigApplier(Protocol):
    """Apply the geometry for these devices, return MIG UUIDs in order (``vgpu.mig.node.MigAllocation``)."""

    def apply(self, devices: Sequence[ContainerDevice], pod: PodView, node_pods: Sequence[PodView]) -> list[str]: ...


def mig_visible_devices(
    mig: MigApplier | None, devices: Sequence[ContainerDevice], pod: PodView, node_pods: Sequence[PodView]
) -> list[str]:
    """The container's MIG UUIDs; every failure is an :class:`AllocationError` (never ends the daemon)."""
    if mig is None:
        raise AllocationError("MIG allocation is not available in this plugin build (node mode mig)", reason=REASON_MIG)
    try:
        return mig.apply(devices, pod, node_pods)
    except MigError as exc:
        raise AllocationError(str(exc), reason=REASON_MIG) from None
    except Exception as exc:  # noqa: BLE001 - any MIG failure fails this pod, never the daemon
        raise AllocationError(f"MIG apply failed: {exc}", reason=REASON_MIG) from None
