"""This node's pods as :class:`~vgpu.protocol.pod_model.PodView`, kept beside the pod cache.

Allocate looks for its pod among the node's pods on every call (docs/protocol.md §5.1).  A view —
and the ``devices-to-allocate`` it decodes — is built once per pod resourceVersion, not once per
call: :class:`PodViews` keys them on (UID, resourceVersion) of the objects in the watch cache
(:func:`vgpu.kube.caches.node_pod_cache`) and drops a view when its pod version leaves the cache.
A change of the configured resource names rebuilds them all.

When the source can say what changed (:meth:`vgpu.kube.watchcache.WatchCache.changed_since`),
the views are updated per change, and the pods waiting for Allocate (``bind-phase=allocating``,
not deleting, not terminal) are kept in an index: a call costs the same with 100 or 5,000 pods on
the node.  So are the pods each GPU is assigned to (from ``vgpu-ids-new``), which the over-commit
guard reads (docs/decisions.md decision 11).  Any other source (a LIST per call) is re-read in
full every time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, KeysView
from typing import Any, Protocol

from vgpu.protocol import keys
from vgpu.protocol.errors import ProtocolError
from vgpu.protocol.pod_devices import decode_pod_devices
from vgpu.protocol.pod_model import PodView, ResourceNames, pod_view

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class PodSource(Protocol):
    """Where the pods come from: the node-scoped watch cache (or, for comparison, a LIST)."""

    def items(self) -> list[dict[str, Any]]: ...

    def resync(self) -> None: ...

    def upsert(self, obj: dict[str, Any]) -> bool: ...


def _uid(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("uid", ""))


def _rv(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("resourceVersion", ""))


def assigned_gpus(v: PodView) -> frozenset[str]:
    """The GPUs the scheduler's ``vgpu-ids-new`` names for the pod (none when absent or malformed)."""
    text = v.annotations.get(keys.VGPU_IDS_NEW)
    if not text:
        return frozenset()
    try:
        return frozenset(d.uuid for seg in decode_pod_devices(text, annotation=keys.VGPU_IDS_NEW) for d in seg)
    except ProtocolError:
        return frozenset()


def waiting(v: PodView) -> bool:
    """Whether the pod may be one Allocate is for (the first filters of docs/protocol.md §5.1)."""
    return v.bind_phase == keys.BIND_PHASE_ALLOCATING and not v.deleting and not v.terminal


class PodViews:
    """Views of a :class:`PodSource`.  ``current`` and ``waiting`` are called under the
    allocator's lock; the rest only touch the (thread-safe) source, so the background retry
    queue may call them."""

    def __init__(self, pods: PodSource) -> None:
        self.pods = pods
        self._views: dict[str, PodView] = {}  # by UID
        self._waiting: dict[str, PodView] = {}  # the subset for which waiting() holds
        self._gpus_of: dict[str, frozenset[str]] = {}  # UID -> assigned_gpus() of its view
        self._on_gpu: dict[str, set[str]] = {}  # GPU UUID -> UIDs whose view names it
        self._names: ResourceNames | None = None
        self._version: int | None = None  # the source's version the views stand for

    def current(self, names: ResourceNames) -> list[PodView]:
        """One view per cached pod (in no meaningful order: matching sorts by its own rules)."""
        self._refresh(names)
        return list(self._views.values())

    def waiting(self, names: ResourceNames, also: Iterable[str] = ()) -> list[PodView]:
        """The views of pods waiting for Allocate, and of the pods ``also`` names (UIDs) if cached."""
        self._refresh(names)
        out = list(self._waiting.values())
        for uid in also:
            v = self._views.get(uid)
            if v is not None and uid not in self._waiting:
                out.append(v)
        return out

    def assigned_to(self, names: ResourceNames, gpus: Iterable[str], also: Iterable[str] = ()) -> list[PodView]:
        """The views of pods whose ``vgpu-ids-new`` names one of ``gpus``, and of the pods ``also``
        names (UIDs) if cached: an index, not a scan."""
        self._refresh(names)
        uids: set[str] = set(also)
        for g in gpus:
            uids |= self._on_gpu.get(g, set())
        return [v for u in uids if (v := self._views.get(u)) is not None]

    def uids(self) -> KeysView[str]:
        """The UIDs of the views (as of the last ``current``/``waiting``)."""
        return self._views.keys()

    def _refresh(self, names: ResourceNames) -> None:
        if names != self._names:
            self._views.clear()
            self._waiting.clear()
            self._gpus_of.clear()
            self._on_gpu.clear()
            self._names = names
            self._version = None
        changed_since = getattr(self.pods, "changed_since", None)
        if changed_since is not None and self._version is not None:
            delta = changed_since(self._version)
            if delta is not None:
                self._version, changes = delta
                for uid, pod in changes.items():
                    if pod is None:
                        self._views.pop(uid, None)
                        self._waiting.pop(uid, None)
                        self._unindex(uid)
                    else:
                        self._put(uid, pod, names)
                return
        self._version = getattr(self.pods, "version", None)  # read before items(): a change between is re-read
        self._rebuild(self.pods.items(), names)

    def _rebuild(self, pods: list[Obj], names: ResourceNames) -> None:
        old, old_gpus = self._views, self._gpus_of
        self._views, self._waiting = {}, {}
        self._gpus_of, self._on_gpu = {}, {}
        for pod in pods:
            uid = _uid(pod)
            v = old.get(uid)
            if v is not None and v.resource_version == _rv(pod):
                self._views[uid] = v
                if waiting(v):
                    self._waiting[uid] = v
                self._index(uid, v, old_gpus.get(uid, frozenset()))
            else:
                self._put(uid, pod, names)

    def _put(self, uid: str, pod: Obj, names: ResourceNames) -> None:
        v = self._views.get(uid)
        if v is not None and v.resource_version == _rv(pod):
            return  # the same version: view and indexes stand
        v = pod_view(pod, names)
        if v.limit_problem is not None:
            # Once per pod version: the pod is never a candidate (docs/protocol.md §5.1).
            log.warning("pod %s: %s; it can never be allocated vGPU", v.key, v.limit_problem)
        self._views[uid] = v
        if waiting(v):
            self._waiting[uid] = v
        else:
            self._waiting.pop(uid, None)
        self._index(uid, v)

    def _index(self, uid: str, v: PodView, gpus: frozenset[str] | None = None) -> None:
        """Index ``v`` (a new version of pod ``uid``) under its GPUs; ``gpus`` when already known."""
        if gpus is None:
            gpus = assigned_gpus(v)
        if self._gpus_of.get(uid) == gpus:
            return
        self._unindex(uid)
        if gpus:
            self._gpus_of[uid] = gpus
            for g in gpus:
                self._on_gpu.setdefault(g, set()).add(uid)

    def _unindex(self, uid: str) -> None:
        for g in self._gpus_of.pop(uid, frozenset()):
            held = self._on_gpu.get(g)
            if held is not None:
                held.discard(uid)
                if not held:
                    del self._on_gpu[g]

    def resync(self) -> None:
        """One node-scoped LIST into the pod cache (raises :class:`vgpu.kube.client.KubeError`)."""
        self.pods.resync()

    def write_through(self, obj: object) -> None:
        """A PATCH response goes into the cache at once (the next container's call may follow in ms)."""
        if isinstance(obj, dict):
            self.pods.upsert(obj)

    def contains(self, uid: str) -> bool:
        get = getattr(self.pods, "get", None)
        if get is not None:
            return get(uid) is not None
        return any(_uid(p) == uid for p in self.pods.items())
