"""Pod mapping for the monitor: this node's pods by UID, from the node-scoped watch (docs/decisions.md decision 8).

The monitor never calls the API while serving a scrape (docs/failures.md M-9): a scrape does one
``dict.get`` per container directory on :class:`PodIndex`, which the watch thread keeps current
through the listener of :func:`vgpu.kube.caches.node_pod_cache` (one informer, field selector
``spec.nodeName``, no label selector — so pods without any HAMi label are mapped, M-5).

Each :class:`PodInfo` also carries what the monitor trusts about the pod's containers instead of
their regions (docs/metrics.md §5.1): the GPUs of each vGPU container (its segment of
``vgpu-ids-new``) and its ``CUDA_TASK_PRIORITY`` when the spec states it, computed once per watch
event, so a scrape or a tick only looks them up.  ``vgpu-ids-new`` never changes after scheduling
(docs/protocol.md §3.1); a later, different value is someone editing the pod, so the index keeps
the first assignment it saw for a UID and logs the change once.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from vgpu.config.device_config import default_device_config
from vgpu.config.model import DeviceConfig
from vgpu.hamicore.contract import pod_task_priority
from vgpu.kube.caches import node_pod_cache
from vgpu.kube.client import KubeClient
from vgpu.kube.watchcache import WatchCache
from vgpu.protocol import keys
from vgpu.protocol.errors import ProtocolError
from vgpu.protocol.pod_devices import ContainerDevices, decode_pod_devices, segment_gpu_uuids
from vgpu.protocol.pod_model import ResourceNames, requests_vgpu

log = logging.getLogger(__name__)

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
    assigned: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """vGPU container name → the GPU UUIDs of its ``vgpu-ids-new`` segment; empty when it does not decode."""
    priorities: Mapping[str, int] = field(default_factory=dict)
    """vGPU container name → its ``CUDA_TASK_PRIORITY`` where the spec states it (pod_task_priority)."""
    assignment_error: str | None = None
    """Why ``vgpu-ids-new`` gives no GPUs to anyone (for the log), or None."""
    devices: Mapping[str, ContainerDevices] = field(default_factory=dict)
    """vGPU container name → its ``vgpu-ids-new`` segment (memory and cores per GPU: the allocation)."""
    container_index: Mapping[str, int] = field(default_factory=dict)
    """vGPU container name → its index in ``spec.containers`` (HAMi's ``container_index``)."""

    @property
    def allocates(self) -> bool:
        """Whether its devices count as allocated on the node (docs/metrics.md §3.1)."""
        return not self.terminal and self.bind_phase != "failed" and bool(self.devices)

    def assigned_gpus(self, container: str) -> frozenset[str]:
        """The GPUs the scheduler gave ``container`` and the plugin served; empty for any other container."""
        return self.assigned.get(container, frozenset())

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
        ids = ids if isinstance(ids, str) else None
        vgpu: tuple[str, ...] = ()
        assigned: dict[str, frozenset[str]] = {}
        devices: dict[str, ContainerDevices] = {}
        index: dict[str, int] = {}
        priorities: dict[str, int] = {}
        error = None
        if ids:  # only pods the scheduler gave devices have vGPU containers (and region directories)
            names = names or default_resource_names()
            vgpu_specs = [c for c in specs if requests_vgpu(c, names)]
            vgpu = tuple(str(c["name"]) for c in vgpu_specs)
            devices, error = _assignments(ids, vgpu)
            index = {str(c["name"]): i for i, c in enumerate(specs) if str(c["name"]) in devices}
            assigned = {name: segment_gpu_uuids(seg) for name, seg in devices.items()}
            for c in vgpu_specs:
                prio = pod_task_priority(c)
                if prio is not None:
                    priorities[str(c["name"])] = prio
        return cls(
            uid,
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            frozenset(str(c["name"]) for c in specs),
            phase in TERMINAL_PHASES,
            vgpu,
            ann.get(keys.BIND_PHASE),
            ids,
            assigned,
            priorities,
            error,
            devices,
            index,
        )


def _assignments(ids: str, vgpu: tuple[str, ...]) -> tuple[dict[str, ContainerDevices], str | None]:
    """Segment k of ``vgpu-ids-new`` → the k-th vGPU container, as Allocate matches them
    (docs/protocol.md §3.1, §5.1); nothing for anyone when the value is not what Allocate accepts."""
    try:
        segments = decode_pod_devices(ids, annotation=keys.VGPU_IDS_NEW)
    except ProtocolError as exc:
        return {}, str(exc)
    if len(segments) != len(vgpu):
        return {}, (
            f"{keys.VGPU_IDS_NEW} has {len(segments)} segment(s) "
            f"but the pod has {len(vgpu)} container(s) requesting vGPU"
        )
    return dict(zip(vgpu, segments, strict=True)), None


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
        self._logged: set[tuple[str, str]] = set()  # (UID, what) already logged (writers only)

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
                self._logged = {k for k in self._logged if k[0] != info.uid}
            else:
                self._by_uid[info.uid] = self._pinned(self._by_uid.get(info.uid), info)

    def replace(self, objects: list[dict[str, Any]]) -> None:
        fresh = {}
        for obj in objects:
            info = PodInfo.from_object(obj, self.names)
            if info is not None:
                fresh[info.uid] = info
        with self._lock:
            old = self._by_uid
            fresh = {uid: self._pinned(old.get(uid), info) for uid, info in fresh.items()}
            self._logged = {k for k in self._logged if k[0] in fresh}
            self._by_uid = fresh  # one reference swap: readers see the old or the new map
            self._synced = True

    def _pinned(self, old: PodInfo | None, new: PodInfo) -> PodInfo:
        """``new``, keeping the first ``vgpu-ids-new`` seen for the UID (it never changes after scheduling)."""
        if old is not None and old.vgpu_ids_new and new.vgpu_ids_new != old.vgpu_ids_new:
            if (new.uid, "changed") not in self._logged:
                self._logged.add((new.uid, "changed"))
                log.warning(
                    "pod %s/%s: %s changed from %r to %r after scheduling; the monitor keeps the first value",
                    new.namespace,
                    new.name,
                    keys.VGPU_IDS_NEW,
                    old.vgpu_ids_new,
                    new.vgpu_ids_new,
                )
            return dataclasses.replace(
                new,
                vgpu_containers=old.vgpu_containers,
                vgpu_ids_new=old.vgpu_ids_new,
                assigned=old.assigned,
                priorities=old.priorities,
                assignment_error=old.assignment_error,
                devices=old.devices,
                container_index=old.container_index,
            )
        if new.assignment_error is not None and (new.uid, "error") not in self._logged:
            self._logged.add((new.uid, "error"))
            log.warning(
                "pod %s/%s: %s; its containers' regions get no GPU from the monitor",
                new.namespace,
                new.name,
                new.assignment_error,
            )
        return new


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
