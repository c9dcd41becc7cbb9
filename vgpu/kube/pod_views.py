"""This node's pods as :class:`~vgpu.protocol.pod_model.PodView`, kept beside the pod cache.

Allocate reads every pod of the node on every call (docs/protocol.md §5.1).  A view — and
the ``devices-to-allocate`` it decodes — is built once per pod resourceVersion, not once per
call: :class:`PodViews` keys them on (UID, resourceVersion) of the objects in the watch cache
(:func:`vgpu.kube.caches.node_pod_cache`) and drops a view when its pod version leaves the
cache.  A change of the configured resource names rebuilds them all.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from vgpu.protocol.pod_model import PodView, ResourceNames, pod_view

log = logging.getLogger(__name__)


class PodSource(Protocol):
    """Where the pods come from: the node-scoped watch cache (or, for comparison, a LIST)."""

    def items(self) -> list[dict[str, Any]]: ...

    def resync(self) -> None: ...

    def upsert(self, obj: dict[str, Any]) -> bool: ...


class PodViews:
    """Views of a :class:`PodSource`.  ``current`` is called under the allocator's lock; the
    rest only touch the (thread-safe) source, so the background retry queue may call them."""

    def __init__(self, pods: PodSource) -> None:
        self.pods = pods
        self._views: dict[tuple[str, str], PodView] = {}
        self._names: ResourceNames | None = None

    def current(self, names: ResourceNames) -> list[PodView]:
        """One view per cached pod, in the cache's order."""
        if names != self._names:
            self._views.clear()
            self._names = names
        views = []
        live: set[tuple[str, str]] = set()
        for pod in self.pods.items():
            meta = pod.get("metadata") or {}
            k = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
            v = self._views.get(k)
            if v is None:
                v = pod_view(pod, names)
                self._views[k] = v
                if v.limit_problem is not None:
                    # Once per pod version: the pod is never a candidate (docs/protocol.md §5.1).
                    log.warning("pod %s: %s; it can never be allocated vGPU", v.key, v.limit_problem)
            live.add(k)
            views.append(v)
        if len(self._views) > len(live):
            for k in [k for k in self._views if k not in live]:
                del self._views[k]
        return views

    def resync(self) -> None:
        """One node-scoped LIST into the pod cache (raises :class:`vgpu.kube.client.KubeError`)."""
        self.pods.resync()

    def write_through(self, obj: object) -> None:
        """A PATCH response goes into the cache at once (the next container's call may follow in ms)."""
        if isinstance(obj, dict):
            self.pods.upsert(obj)

    def contains(self, uid: str) -> bool:
        return any((p.get("metadata") or {}).get("uid") == uid for p in self.pods.items())
