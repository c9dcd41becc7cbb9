"""Naming a kubelet-side shortage of vgpu-number IDs (docs/failures.md A-12, Event ``VGPUKubeletShortage``).

When the kubelet has fewer free IDs than a container needs, it rejects the pod itself
(``Requested N, Available M``) and never calls Allocate, so the plugin cannot see that pod being
refused.  What it does see is GetPreferredAllocation: without topology alignment the kubelet
passes *all* its free IDs, so ``available - size`` is exactly what is left for the next
admissions.  Every other pod waiting here (``bind-phase=allocating``) that still needs more than
that gets one Warning Event naming the kubelet-side shortage, before the kubelet's own
``UnexpectedAdmissionError``.  Only when the call has a candidate: a call for a pod we do not
know fails in Allocate and the kubelet gets its IDs back.  With several identical candidates,
the steered one (oldest ``vgpu-time``) is taken for the pod being admitted now, as the kubelet
admits pods in arrival order.  Allocate itself is untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vgpu.plugin.api import HEALTHY, pb
from vgpu.plugin.matching import Candidate, Journal, number_left
from vgpu.protocol import ProtocolError, keys
from vgpu.protocol.pod_model import PodView

if TYPE_CHECKING:
    from vgpu.plugin.resources import ResourceManager


class KubeletShortage:
    """Which waiting pods to warn, each once while it stays in the pod cache."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self._warned: set[str] = set()  # pod UIDs already told

    def warnings(
        self,
        resource: ResourceManager,
        views: Sequence[PodView],
        request: pb.ContainerPreferredAllocationRequest,
        steered: Candidate,
        journal: Journal,
        split_count: int,
    ) -> list[tuple[PodView, str]]:
        """(pod, Event message) for each pod the kubelet will refuse once ``steered`` is admitted."""
        # The steered pod finishes its admission first: all its vgpu-number containers still to come.
        steered_need = sum(n for _, n in number_left(steered.view, journal)) or request.allocation_size
        free = max(len(set(request.available_deviceIDs) | set(request.must_include_deviceIDs)) - steered_need, 0)
        self._warned &= {v.uid for v in views}
        healthy: tuple[int, int] | None = None
        out = []
        for view, refused, requested, available, need in waiting_number_needs(views, free, self.node_name, journal):
            if view.uid == steered.view.uid or view.uid in self._warned:
                continue
            if healthy is None:
                ids = resource.devices()
                healthy = (sum(1 for _, h in ids if h == HEALTHY), len(ids))
            self._warned.add(view.uid)
            out.append(
                (
                    view,
                    (
                        f"kubelet-side shortage of {resource.resource_name} device IDs "
                        f"on node {self.node_name}: once pod "
                        f"{steered.view.key} is admitted the kubelet has {free} free, but this pod still needs {need}; "
                        f'the kubelet will refuse it itself at container {refused} ("Requested: {requested}, '
                        f'Available: {available}", '
                        "UnexpectedAdmissionError) without calling the device plugin, unless IDs are freed first. "
                        f"The node advertises {healthy[0]} healthy of {healthy[1]} IDs "
                        f"(deviceSplitCount {split_count} per GPU; unhealthy IDs withheld). The scheduler "
                        "counted room for this pod, so the kubelet holds IDs the scheduler does not count "
                        "(pods not placed by Volcano, or pods not yet released)."
                    ),
                )
            )
        return out


def waiting_number_needs(
    views: Sequence[PodView], free: int, node_name: str, journal: Journal
) -> list[tuple[PodView, str, int, int, int]]:
    """Pods waiting here whose remaining vgpu-number containers do not fit in ``free`` IDs: (pod,
    the container the kubelet refuses, its request, the IDs then free, the pod's remaining need)."""
    out = []
    for v in views:
        if (
            v.vgpu_node != node_name
            or v.deleting
            or v.terminal
            or v.init_requests_vgpu
            or v.bind_phase != keys.BIND_PHASE_ALLOCATING
        ):
            continue
        if journal.tombstoned(v.uid) or isinstance(v.to_allocate, ProtocolError) or v.limit_problem is not None:
            continue  # done, or failed on sight by the next Allocate: the kubelet is not the problem
        limits = number_left(v, journal)
        left = free
        for cname, n in limits:
            if n > left:
                out.append((v, cname, n, left, sum(m for _, m in limits)))
                break
            left -= n
    return out
