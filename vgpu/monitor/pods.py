"""Pod mapping for the monitor: this node's pods by UID, from the node-scoped watch (docs/decisions.md decision 8).

The monitor never calls the API while serving a scrape (docs/failures.md M-9): a scrape does one
``dict.get`` per container directory on :class:`PodIndex`, which the watch thread keeps current
through the listener of :func:`vgpu.kube.caches.node_pod_cache` (one informer, field selector
``spec.nodeName``, no label selector — so pods without any HAMi label are mapped, M-5).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

from vgpu.config.device_config import default_device_config
from vgpu.config.model import DeviceConfig
from vgpu.kube.caches import node_pod_cache
from vgpu.kube.client import KubeClient
from vgpu.kube.watchcache import WatchCache
from vgpu.protocol import keys
from vgpu.protocol.pod_model import ResourceNames, requests_vgpu

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def resource_names(device: DeviceConfig) -> ResourceNames:
    """The vGPU resource names of a ``--device-config`` (which containers request vGPU)."""
    return ResourceNames(device.resource_count_name, device.resource_memory_name, device.resource_core_name)


def default_resource_names() -> ResourceNames:
    return resource_names(default_device_config())


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the monitor keeps of one pod (a few fields, not the object)."""

    uid: str
    namespace: str
    name: str
    containers: frozenset[str]  # names in spec.containers
    terminal: bool  # phase Succeeded or Failed: no container metrics, GC may remove (docs/metrics.md §4.3, §6.3)
    vgpu_containers: tuple[str, ...] = ()  # spec order, those requesting vGPU: segment k of vgpu-ids-new
    bind_phase: str | None = None
    vgpu_ids_new: str | None = None

    @classmethod
    def from_object(cls, obj: dict[str, Any], names: ResourceNames | None = None) -> PodInfo | None:
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if not isinstance(uid, str) or not uid:
            return None
        spec = obj.get("spec") or {}
        specs = [c for c in (spec.get("containers") or []) if isinstance(c, dict) and c.get("name")]
        phase = (obj.get("status") or {}).get("phase")
        ann = meta.get("annotations")
        ann = ann if isinstance(ann, dict) else {}
        ids = ann.get(keys.VGPU_IDS_NEW)
        vgpu: tuple[str, ...] = ()
        if ids:  # only pods the scheduler gave devices need it (hami_mig_device_info)
            names = names or default_resource_names()
            vgpu = tuple(str(c["name"]) for c in specs if requests_vgpu(c, names))
        return cls(
            uid,
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            frozenset(str(c["name"]) for c in specs),
            phase in TERMINAL_PHASES,
            vgpu,
            ann.get(keys.BIND_PHASE),
            ids,
        )


class PodLookup(Protocol):
    """What the monitor needs to know about pods."""

    @property
    def synced(self) -> bool:
        """True once the pod list is complete (GC waits for it, docs/metrics.md §6.3 rule 1)."""

    def get(self, uid: str) -> PodInfo | None: ...

    def pods(self) -> list[PodInfo]: ...


class PodIndex:
    """UID → :class:`PodInfo`, fed by watch events.  Lock-free reads (one ``dict.get``).

    ``names``: the vGPU resource names of ``--device-config`` (which containers request vGPU).
    """

    def __init__(self, names: ResourceNames | None = None) -> None:
        self.names = names or default_resource_names()
        self._by_uid: dict[str, PodInfo] = {}
        self._synced = False
        self._lock = threading.Lock()  # writers only

    @property
    def synced(self) -> bool:
        return self._synced

    def get(self, uid: str) -> PodInfo | None:
        return self._by_uid.get(uid)

    def pods(self) -> list[PodInfo]:
        return list(self._by_uid.values())

    def __len__(self) -> int:
        return len(self._by_uid)

    def apply(self, kind: str, obj: dict[str, Any]) -> None:
        info = PodInfo.from_object(obj, self.names)
        if info is None:
            return
        with self._lock:
            if kind == "DELETED":
                self._by_uid.pop(info.uid, None)
            else:
                self._by_uid[info.uid] = info

    def replace(self, objects: list[dict[str, Any]]) -> None:
        fresh = {}
        for obj in objects:
            info = PodInfo.from_object(obj, self.names)
            if info is not None:
                fresh[info.uid] = info
        with self._lock:
            self._by_uid = fresh  # one reference swap: readers see the old or the new map
            self._synced = True


class WatchedPods(PodIndex):
    """:class:`PodIndex` kept current by the node-scoped pod watch of :mod:`vgpu.kube`."""

    def __init__(self, client: KubeClient, node_name: str, names: ResourceNames | None = None) -> None:
        super().__init__(names)
        self.cache: WatchCache = node_pod_cache(client, node_name, listener=self._on_event)

    def _on_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "SYNC":  # a (re-)LIST replaced the cache contents
            self.replace(self.cache.items())
        else:
            self.apply(kind, obj)

    def start(self) -> WatchedPods:
        self.cache.start()
        return self

    def wait_synced(self, timeout: float) -> bool:
        return self.cache.wait_synced(timeout) and self._synced

    def stop(self) -> None:
        self.cache.stop()
