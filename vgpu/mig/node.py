"""What `vgpu plugin` holds for dynamic MIG on a node in mode ``mig`` (the daemon's MIG seam).

The daemon calls :func:`start_mig_node` right after GPU discovery and selection; it gets back
the :class:`MigNode` and the GPUs to advertise (excluded ones removed, re-enumerated when MIG
mode was switched on).  ``MigNode.applier`` is the ``mig`` argument of the Volcano allocator;
``post_events`` puts one Warning Event per excluded GPU on the Node once API access exists.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from vgpu.config.model import EffectiveConfig
from vgpu.mig.allocation import MigAllocation
from vgpu.mig.manager import MigManager
from vgpu.mig.startup import EVENT_REASON_EXCLUDED, MigStartupReport, prepare_mig_gpus
from vgpu.nvml.device import GpuInfo

log = logging.getLogger(__name__)


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


def start_mig_node(library: str | None, config: Callable[[], EffectiveConfig], gpus: Sequence[GpuInfo],
                   node_name: str, rediscover: Callable[[], list[GpuInfo]]) -> tuple[MigNode, list[GpuInfo]]:
    """mig.md §5.1 for the selected ``gpus``; returns the node state and the GPUs to advertise.

    ``rediscover`` re-runs discovery and selection; it is called when MIG mode was switched on
    for some GPU, because handles and minor numbers may change (mig.md §7).  Raises only when
    the NVML library cannot be opened at all (``NvmlError``).
    """
    manager = MigManager.open(library, config, gpus)
    report = prepare_mig_gpus(manager, gpus)
    if report.reenumerate:
        gpus = rediscover()
        manager.set_gpus(gpus)
    node = MigNode(manager, report, node_name)
    kept = node.advertised(gpus)
    log.info("mig mode: %d of %d GPU(s) serve MIG%s", len(kept), len(gpus),
             f"; excluded: {', '.join(sorted(node.excluded))}" if node.excluded else "")
    return node, kept
