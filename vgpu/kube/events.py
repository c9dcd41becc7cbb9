"""Kubernetes Events the plugin posts (docs/decisions.md decision 6: every allocation failure is visible).

Core/v1 Events, named like client-go's recorder (``<object>.<unix-nanos in hex>``), with
``source.component`` = :data:`COMPONENT` and ``source.host`` = this node, so
``kubectl describe pod`` shows them next to the kubelet's ``UnexpectedAdmissionError``.
Node events use the kubelet's convention: namespace ``default``, ``uid`` = the node name.

Repeats are aggregated as client-go's event recorder does (docs/protocol.md §10): the same
involved object, type, reason and message again within :data:`AGGREGATE_WINDOW_S` of the last
occurrence PATCHes the existing Event's ``count`` and ``lastTimestamp`` instead of creating a new
one, so 3,000 spurious Allocates leave one Event with ``count: 3000``, not 3,000 Events.  The
cache of recent Events is bounded (:data:`MAX_CACHED`, least recently used evicted first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vgpu.kube.client import KubeApiError, KubeClient, KubeError

COMPONENT = "vgpu-device-plugin"
MAX_MESSAGE = 1024
"""The kubelet's recorder truncates event messages to 1 KiB; so do we."""
AGGREGATE_WINDOW_S = 600.0
"""A repeat this soon after the last occurrence counts on the existing Event (client-go: 10 min)."""
MAX_CACHED = 4096
"""Events remembered for aggregation (client-go's LRU holds 4096 too)."""

# Reasons (docs/protocol.md §10; a zero memory limit means unlimited: docs/hami-core.md §3.2)
REASON_ALLOCATION_FAILED = "VGPUAllocationFailed"
REASON_ZERO_MEMORY_LIMIT = "VGPUZeroMemoryLimit"
REASON_NO_POD = "VGPUNoPendingPod"
REASON_UNLIMITED_CONTAINER = "VGPUContainerUnlimited"
REASON_GPU_UNHEALTHY = "VGPUDeviceUnhealthy"
"""Warning on the Node: a GPU was marked unhealthy, and what that did to its register record (docs/health.md §8)."""
REASON_GPU_RECOVERED = "VGPUDeviceRecovered"
"""Normal on the Node: the GPU is healthy again."""
REASON_KUBELET_SHORTAGE = "VGPUKubeletShortage"
"""docs/failures.md A-12: a pod the scheduler placed here waits, but the kubelet has too few free
vgpu-number IDs left to admit it; the kubelet refuses it itself and never calls the plugin."""


def _now_rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _truncate(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def pod_reference(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": meta.get("namespace", "default"),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": str(meta.get("resourceVersion", "")),
    }


def node_reference(node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_name}


def build_event(
    involved: dict[str, Any], event_type: str, reason: str, message: str, host: str, now: float | None = None
) -> dict[str, Any]:
    """The Event body (one place builds it; tests and the demo read the same fields)."""
    t = time.time() if now is None else now
    namespace = involved.get("namespace") or "default"
    stamp = _now_rfc3339(t)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved.get('name', 'unknown')}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": _truncate(message),
        "type": event_type,
        "source": {"component": COMPONENT, "host": host},
        "reportingComponent": COMPONENT,
        "reportingInstance": host,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


_Key = tuple[str, str, str, str, str, str, str]
"""(kind, namespace, name, uid, type, reason, message): what makes two Events the same one."""


@dataclass
class _Seen:
    """An Event this recorder created: where it is and how often it happened."""

    namespace: str
    name: str
    count: int
    last: float
    """Monotonic time of the last occurrence."""


class EventRecorder:
    """Posts Warning/Normal events, aggregating repeats; raises :class:`vgpu.kube.client.KubeError`
    when it cannot (the caller's write path queues and retries the whole call)."""

    def __init__(
        self,
        client: KubeClient,
        host: str,
        *,
        window_s: float = AGGREGATE_WINDOW_S,
        max_cached: int = MAX_CACHED,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.client = client
        self.host = host
        self.window_s = window_s
        self.max_cached = max_cached
        self.clock = clock
        self.monotonic = monotonic
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        self._lock = threading.Lock()  # the allocator and the retry queue's thread both record

    def pod_event(self, pod: Mapping[str, Any], reason: str, message: str, event_type: str = "Warning") -> None:
        self._record(pod_reference(pod), event_type, reason, message)

    def node_event(self, node_name: str, reason: str, message: str, event_type: str = "Warning") -> None:
        self._record(node_reference(node_name), event_type, reason, message)

    @property
    def cached(self) -> int:
        """How many Events are remembered for aggregation (at most ``max_cached``)."""
        with self._lock:
            return len(self._seen)

    def _record(self, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        namespace = involved.get("namespace") or "default"
        message = _truncate(message)
        key: _Key = (
            str(involved.get("kind", "")),
            str(namespace),
            str(involved.get("name", "")),
            str(involved.get("uid", "")),
            event_type,
            reason,
            message,
        )
        now, mono = self.clock(), self.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and mono - seen.last <= self.window_s:
                seen.count += 1
                seen.last = mono
                count = seen.count
                self._seen.move_to_end(key)
            else:
                seen = None
        if seen is not None:
            try:
                self.client.patch_event(seen.namespace, seen.name, {"count": count, "lastTimestamp": _now_rfc3339(now)})
                return
            except KubeApiError as exc:
                if not exc.not_found and exc.status != 403:
                    self._undo(key, seen, count)
                    raise
                # The Event expired (the API server's event TTL) or was deleted, or an older
                # ClusterRole grants no patch: start a new one.
                with self._lock:
                    if self._seen.get(key) is seen:
                        del self._seen[key]
            except KubeError:
                self._undo(key, seen, count)
                raise
        body = build_event(involved, event_type, reason, message, self.host, now)
        created = self.client.create_event(namespace, body)
        name = str((created.get("metadata") or {}).get("name") or body["metadata"]["name"])
        with self._lock:
            self._seen[key] = _Seen(namespace, name, 1, mono)
            self._seen.move_to_end(key)
            while len(self._seen) > self.max_cached:
                self._seen.popitem(last=False)

    def _undo(self, key: _Key, seen: _Seen, count: int) -> None:
        """The PATCH did not land: take its occurrence back (the caller's retry counts it again)."""
        with self._lock:
            if self._seen.get(key) is seen and seen.count == count:
                seen.count -= 1
