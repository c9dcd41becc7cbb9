"""MIG identity for the monitor's ``hami_mig_device_info`` family (docs/metrics.md §3).

The monitor owns the pod mapping; this module turns MIG slots into what NVML says serves
them now, using the same plan as the plugin (docs/mig.md §6), so both agree without talking:

    manager = MigManager.open(library, config, gpus)       # --nvml-library, --device-config
    for ref in slots_of(pod.annotations["volcano.sh/vgpu-ids-new"]):
        ...                                                # ref.container, ref.vdevice_index
    infos = inventory(manager, [(r.uuid, r.group, r.position) for r in refs])

Slots that cannot be resolved (GPU gone, instance missing, unknown group) are skipped.
Each (GPU, group) is read from NVML once per call.  Read-only: nothing is created or destroyed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vgpu.mig.errors import MigError
from vgpu.mig.manager import MigManager
from vgpu.mig.reconcile import MigInstanceInfo
from vgpu.nvml.errors import NvmlError
from vgpu.protocol import ProtocolError, decode_pod_devices, keys


@dataclass(frozen=True)
class MigSlotRef:
    """One MIG device of a pod's ``vgpu-ids-new``: k-th vGPU container, index in its segment."""

    container: int
    vdevice_index: int
    uuid: str
    group: str
    position: int


def slots_of(vgpu_ids_new: str | None) -> list[MigSlotRef]:
    """The MIG devices of a ``vgpu-ids-new`` value; [] for none or an undecodable value."""
    if not vgpu_ids_new:
        return []
    try:
        segments = decode_pod_devices(vgpu_ids_new, annotation=keys.VGPU_IDS_NEW)
    except ProtocolError:
        return []
    return [
        MigSlotRef(k, i, d.uuid, d.mig.group, d.mig.position)
        for k, segment in enumerate(segments)
        for i, d in enumerate(segment)
        if d.mig is not None
    ]


def inventory(manager: MigManager, slots: Iterable[tuple[str, str, int]]) -> list[MigInstanceInfo]:
    """The MIG device of every resolvable (GPU UUID, group, position), in input order."""
    resolved: dict[tuple[str, str], dict[int, MigInstanceInfo]] = {}
    out = []
    for uuid, group, position in slots:
        key = (uuid, group)
        if key not in resolved:
            try:
                resolved[key] = manager.resolve(uuid, group)
            except (MigError, NvmlError):
                resolved[key] = {}
        info = resolved[key].get(position)
        if info is not None:
            out.append(info)
    return out
