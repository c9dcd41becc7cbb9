"""Releasing the scheduler's node lock ``hamivgpu`` (docs/protocol.md §2.4).

The scheduler takes the lock (when ``NodeLockEnable``) and never releases it; the plugin
deletes it unconditionally after a pod's last container, on every failure, and when no pending
pod is found.  The patch ``{"metadata":{"annotations":{"hamivgpu":null}}}`` is a no-op when the
key is absent.  Five tries 100 ms apart, then the release goes to the background queue.
Older lock names (``vgpu``, ``vgpu4pd``, ``gpu``) are never touched.  This is the only place
that releases the lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from vgpu.kube.client import KubeClient
from vgpu.kube.retry import RetryQueue
from vgpu.kube.writes import Tries, write
from vgpu.protocol import node_lock_release_patch

RELEASE_TRIES = 5
RELEASE_SLEEP_S = 0.1


def release_node_lock(
    client: KubeClient,
    node_name: str,
    *,
    queue: RetryQueue | None = None,
    sleep: Callable[[float], None] = time.sleep,
    now: bool = True,
) -> bool:
    """Delete ``hamivgpu`` from the node; True when done now, False when queued (or given up).

    ``now=False`` queues it without a try (the caller already knows the API server is unreachable).
    """

    def patch() -> object:
        return client.patch_node(node_name, node_lock_release_patch())

    return write(
        f"release node lock hamivgpu on {node_name}",
        patch,
        queue=queue,
        tries=Tries(RELEASE_TRIES, RELEASE_SLEEP_S, 1.0),
        now=now,
        sleep=sleep,
    ).done
