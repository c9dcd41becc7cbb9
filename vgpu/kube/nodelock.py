"""Releasing the scheduler's node lock ``hamivgpu`` (volcano-protocol.md §2.4).

The scheduler takes the lock (when ``NodeLockEnable``) and never releases it; the plugin
deletes it unconditionally after a pod's last container, on every failure, and when no pending
pod is found.  The patch ``{"metadata":{"annotations":{"hamivgpu":null}}}`` is a no-op when the
key is absent.  Five tries 100 ms apart, then the release goes to the background queue.
Older lock names (``vgpu``, ``vgpu4pd``, ``gpu``) are never touched.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from vgpu.kube.client import KubeClient, KubeError
from vgpu.kube.retry import RetryQueue, call_with_retries
from vgpu.protocol import node_lock_release_patch

log = logging.getLogger(__name__)

RELEASE_TRIES = 5
RELEASE_SLEEP_S = 0.1


def release_node_lock(client: KubeClient, node_name: str, *, queue: RetryQueue | None = None,
                      sleep: Callable[[float], None] = time.sleep) -> bool:
    """Delete ``hamivgpu`` from the node; True when done now, False when queued (or given up)."""
    def patch() -> object:
        return client.patch_node(node_name, node_lock_release_patch())

    try:
        call_with_retries(patch, tries=RELEASE_TRIES, first_delay=RELEASE_SLEEP_S, factor=1.0, sleep=sleep)
        return True
    except KubeError as exc:
        log.warning("cannot release node lock hamivgpu on %s: %s", node_name, exc)
        if queue is not None:
            queue.submit(f"release node lock hamivgpu on {node_name}", patch)
        return False
