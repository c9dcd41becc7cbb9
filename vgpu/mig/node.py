"""What `vgpu plugin` holds for dynamic MIG on a node in mode ``mig`` (the daemon's MIG seam).

The daemon calls :func:`start_mig_node` right after GPU discovery and selection; it gets back
the :class:`MigNode` and the GPUs to advertise (excluded ones removed, re-enumerated when MIG
mode was switched on).  ``post_events`` puts one Warning Event per excluded GPU on the Node once
API access exists.

``MigNode.applier`` (:class:`MigAllocation`) is the ``mig`` argument of the Volcano allocator
(docs/mig.md §5.2–§5.3): the allocator matches the pod and the container, then hands it the
container's ``UUID[group-pos]`` devices; it checks the guards (:mod:`vgpu.mig.holdings`),
applies each GPU's group and returns the MIG UUIDs for ``NVIDIA_VISIBLE_DEVICES`` in the
container's device order.  Every failure is a :class:`vgpu.mig.errors.MigError` whose text is
the guard's or the apply's (``MIG instance GI … is in use; not reshaping``, ``MIG apply failed
on …``); the plugin turns it into the pod Event and ``bind-phase=failed``.  Nothing here can
end the process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from vgpu.config.model import EffectiveConfig
from vgpu.mig.errors import MigError, MigGuardError
from vgpu.mig.holdings import check_guards, holdings
from vgpu.mig.manager import MigManager, slot_id
from vgpu.mig.reconcile import ApplyResult
from vgpu.mig.startup import EVENT_REASON_EXCLUDED, MigStartupReport, prepare_mig_gpus
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.errors import NvmlError
from vgpu.protocol import ContainerDevice
from vgpu.protocol.pod_model import PodView

log = logging.getLogger(__name__)


class MigAllocation:
    """The plugin's MIG applier: guards, then one apply per GPU, then the MIG UUIDs."""

    def __init__(self, manager: MigManager, node_name: str | None = None) -> None:
        self.manager = manager
        self.node_name = node_name

    def apply(self, devices: Sequence[ContainerDevice], pod: PodView, node_pods: Sequence[PodView]) -> list[str]:
        """The MIG UUIDs of ``devices``, in order; raises :class:`MigError` (NVML errors included)."""
        try:
            return [
                r.device(d.mig.position).mig_uuid  # type: ignore[union-attr]
                for d, r in zip(devices, self.apply_devices(devices, pod, node_pods), strict=True)
            ]
        except NvmlError as exc:
            raise MigError(f"MIG apply failed: {exc}") from None

    def apply_devices(
        self, devices: Sequence[ContainerDevice], pod: PodView, node_pods: Sequence[PodView]
    ) -> list[ApplyResult]:
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
            log.info(
                "pod %s: %s -> %s",
                pod.key,
                slot_id(d.uuid, d.mig.group, d.mig.position),
                result.device(d.mig.position).mig_uuid,
            )
            results.append(result)
        return results


class MigNode:
    def __init__(self, manager: MigManager, report: MigStartupReport, node_name: str) -> None:
        self.manager = manager
        self.report = report
        self.node_name = node_name
        self.applier = MigAllocation(manager, node_name)
        self.excluded = frozenset(e.uuid for e in report.excluded)

    def advertised(self, gpus: Sequence[GpuInfo]) -> list[GpuInfo]:
        """``gpus`` without the ones excluded at startup (they stay out until a restart)."""
        return [g for g in gpus if g.uuid not in self.excluded]

    def post_events(self, node_event: Callable[[str, str, str], None]) -> None:
        """One Warning Event per exclusion: ``node_event(node_name, reason, message)``; never raises."""
        for exclusion in self.report.excluded:
            try:
                node_event(self.node_name, EVENT_REASON_EXCLUDED, exclusion.message)
            except Exception as exc:  # noqa: BLE001 - an Event is best effort; the log has the reason
                log.warning("cannot post the MIG exclusion Event for %s: %s", exclusion.uuid, exc)

    def close(self) -> None:
        self.manager.close()


def start_mig_node(
    library: str | None,
    config: Callable[[], EffectiveConfig],
    gpus: Sequence[GpuInfo],
    node_name: str,
    rediscover: Callable[[], list[GpuInfo]],
) -> tuple[MigNode, list[GpuInfo]]:
    """docs/mig.md §5.1 for the selected ``gpus``; returns the node state and the GPUs to advertise.

    ``rediscover`` re-runs discovery and selection; it is called when MIG mode was switched on
    for some GPU, because handles and minor numbers may change (docs/mig.md §7).  Raises only when
    the NVML library cannot be opened at all (``NvmlError``).
    """
    manager = MigManager.open(library, config, gpus)
    report = prepare_mig_gpus(manager, gpus)
    if report.reenumerate:
        gpus = rediscover()
        manager.set_gpus(gpus)
    node = MigNode(manager, report, node_name)
    kept = node.advertised(gpus)
    log.info(
        "mig mode: %d of %d GPU(s) serve MIG%s",
        len(kept),
        len(gpus),
        f"; excluded: {', '.join(sorted(node.excluded))}" if node.excluded else "",
    )
    return node, kept
