"""``hami_mig_device_info``: the MIG instance behind each MIG allocation on this node (docs/metrics.md §3, ours).

One sample (value 1) per MIG device of each pod on this node whose ``volcano.sh/bind-phase`` is
``success``: the k-th segment of ``volcano.sh/vgpu-ids-new`` belongs to the k-th container (spec
order) that requests vGPU, and ``vdevice_index`` is the position in that segment.
``mig_uuid``, ``gpu_instance_id`` and ``compute_instance_id`` come from NVML through
:mod:`vgpu.mig.inventory` — the plugin's own deterministic plan (docs/mig.md §6) — so monitor and
plugin agree without talking.  Slots that cannot be resolved are skipped.  Pods in phase
Succeeded/Failed are left out, as for the container families (our choice).

MIG queries are NVML calls, so they run in a worker (:class:`vgpu.monitor.host.BoundedRefresh`):
a scrape waits at most the NVML bound and otherwise gets the last good rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import NamedTuple

from prometheus_client.registry import Collector

from vgpu.mig.inventory import inventory, slots_of
from vgpu.mig.manager import MigManager
from vgpu.monitor import families as F
from vgpu.monitor.exposition import RenderedFamily, label_text
from vgpu.monitor.host import DEFAULT_BOUND_S, BoundedRefresh
from vgpu.monitor.pods import PodLookup
from vgpu.protocol import keys

log = logging.getLogger(__name__)


class MigRow(NamedTuple):
    """One sample; the fields are ``hami_mig_device_info``'s labels in their order (families.py)."""

    namespace: str
    pod: str
    container: str
    vdevice_index: int
    device_uuid: str  # the parent GPU
    mig_uuid: str
    profile: str  # the geometry's instance name, e.g. 2g.20gb
    gpu_instance_id: int
    compute_instance_id: int


assert MigRow._fields == F.HAMI_MIG_DEVICE_INFO.labels


def mig_rows(pods: PodLookup, manager: MigManager) -> list[MigRow]:
    """Every resolvable MIG device of this node's allocated pods (NVML calls: run it in a worker)."""
    wanted = []  # (pod, container name, slot ref)
    for pod in pods.pods():
        if pod.terminal or pod.bind_phase != keys.BIND_PHASE_SUCCESS or not pod.vgpu_ids_new:
            continue
        for ref in slots_of(pod.vgpu_ids_new):
            if ref.container < len(pod.vgpu_containers):
                wanted.append((pod, pod.vgpu_containers[ref.container], ref))
    if not wanted:
        return []
    found = {
        (i.gpu_uuid, i.group, i.position): i
        for i in inventory(manager, [(r.uuid, r.group, r.position) for _, _, r in wanted])
    }
    rows = []
    for pod, ctr, ref in wanted:
        info = found.get((ref.uuid, ref.group, ref.position))
        if info is not None:
            rows.append(
                MigRow(
                    pod.namespace,
                    pod.name,
                    ctr,
                    ref.vdevice_index,
                    ref.uuid,
                    info.mig_uuid,
                    info.profile,
                    info.gpu_instance_id,
                    info.compute_instance_id,
                )
            )
    return rows


class MigInfoSource:
    """The last resolved MIG rows, refreshed on demand within the NVML bound."""

    def __init__(self, pods: PodLookup, manager: MigManager, *, bound_s: float = DEFAULT_BOUND_S):
        self.manager = manager
        self._refresh: BoundedRefresh[list[MigRow]] = BoundedRefresh(
            "monitor-mig", lambda: mig_rows(pods, manager), bound_s=bound_s
        )

    def start(self) -> MigInfoSource:
        self._refresh.start()
        return self

    def latest(self) -> list[MigRow]:
        return self._refresh.latest() or []

    def stop(self, timeout: float = 2.0) -> None:
        if self._refresh.stop(timeout):
            self.manager.close()


class MigInfoCollector(Collector):
    def __init__(self, source: MigInfoSource):
        self.source = source

    def collect(self) -> Iterator[RenderedFamily]:
        fam = F.HAMI_MIG_DEVICE_INFO
        f = RenderedFamily(fam.name, fam.help, fam.type)
        for r in self.source.latest():  # MigRow's fields are the family's labels, in order
            labels = label_text(zip(fam.labels, map(str, r), strict=True))
            f.lines.append(f"hami_mig_device_info{{{labels},{F.ZONE}}} 1\n")
        yield f
