"""What an Allocate writes back to the API server (docs/protocol.md §5.2, docs/decisions.md decision 6).

- the **progress** of a pod: the remaining ``devices-to-allocate`` after each consumed segment,
  and with the last one ``bind-phase=success`` and the done ``vgpu-time``;
- the **failure** of a pod: Warning Event ``VGPUAllocationFailed``, ``bind-phase=failed``;
- the **node lock** release (:mod:`vgpu.kube.nodelock`) and the pod and node **Events**.

Each write goes through :func:`vgpu.kube.writes.write`: tried now within the call's time budget,
else handed to the background retry queue, so no pod stays ``allocating`` without an
explanation once the API server is back.  PATCH responses are written through to the pod cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from vgpu.kube import events as ev
from vgpu.kube.client import KubeApiError, KubeClient, KubeError, KubeUnavailable
from vgpu.kube.nodelock import release_node_lock
from vgpu.kube.pod_views import PodViews
from vgpu.kube.retry import RetryQueue
from vgpu.kube.writes import Tries, gone, write
from vgpu.plugin.responses import REASON_API, AllocationError
from vgpu.protocol import all_consumed, allocation_failed, allocation_progress, consume_segment, keys
from vgpu.protocol.pod_model import PodView, VgpuContainer

log = logging.getLogger(__name__)

PATCH_TRIES = Tries(5, 0.1)
"""The progress PATCH: five tries, 0.1 s doubling, before the pod fails (or the success is queued)."""


class PodWriter:
    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        pods: PodViews,
        retry: RetryQueue,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.pods = pods
        self.retry = retry
        self.sleep = sleep
        self.events = ev.EventRecorder(client, node_name)

    def progress(self, view: PodView, target: VgpuContainer) -> bool:
        """PATCH the segments left after ``target``'s; True when that completes the pod.

        Only the completion may be left to the background queue (the container is served then);
        any other write that cannot be made now raises :class:`AllocationError`."""
        remaining = consume_segment(view.devices_to_allocate or "", target.index)
        done = all_consumed(remaining)
        annotations = allocation_progress(remaining)
        got = write(
            f"{'bind-phase=success' if done else keys.DEVICES_TO_ALLOCATE} on pod {view.key}",
            lambda: self.pods.write_through(self.client.patch_pod_annotations(view.namespace, view.name, annotations)),
            queue=self.retry,
            tries=PATCH_TRIES,
            sleep=self.sleep,
            hand_off=lambda exc: done and _transient(exc),
            still_needed=lambda: self.pods.contains(view.uid),
        )
        if got.error is not None and not got.queued:
            raise AllocationError(f"cannot record the allocation on pod {view.key}: {got.error}", reason=REASON_API)
        return done

    def failed(self, view: PodView, message: str) -> None:
        """The failure path's writes: Event, bind-phase=failed, lock release; never raises.

        Once the API server proved unreachable, the remaining writes go straight to the queue."""
        now = True
        for what, fn in (
            (
                f"event {ev.REASON_ALLOCATION_FAILED} on pod {view.key}",
                lambda: self.events.pod_event(view.raw, ev.REASON_ALLOCATION_FAILED, message),
            ),
            (
                f"bind-phase=failed on pod {view.key}",
                lambda: self.pods.write_through(
                    self.client.patch_pod_annotations(view.namespace, view.name, allocation_failed())
                ),
            ),
        ):
            got = write(
                what,
                fn,
                queue=self.retry,
                now=now,
                hand_off=lambda exc: not gone(exc),
                still_needed=lambda: self.pods.contains(view.uid),
            )
            now = now and not isinstance(got.error, KubeUnavailable)
        self.release_lock(now=now)

    def release_lock(self, *, now: bool = True) -> None:
        release_node_lock(self.client, self.node_name, queue=self.retry, sleep=self.sleep, now=now)

    def pod_event(self, view: PodView, reason: str, message: str) -> None:
        write(
            f"event {reason} on pod {view.key}",
            lambda: self.events.pod_event(view.raw, reason, message),
            queue=self.retry,
            still_needed=lambda: self.pods.contains(view.uid),
        )

    def node_event(self, reason: str, message: str) -> None:
        log.warning("node %s: %s", self.node_name, message)
        write(
            f"event {reason} on node {self.node_name}",
            lambda: self.events.node_event(self.node_name, reason, message),
            queue=self.retry,
        )


def _transient(exc: KubeError) -> bool:
    """Unreachable (or out of budget) or a 5xx: the completion may still land later."""
    return isinstance(exc, KubeUnavailable) or (isinstance(exc, KubeApiError) and exc.status >= 500)
