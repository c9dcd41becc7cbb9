"""Allocate and GetPreferredAllocation for the Volcano protocol (volcano-protocol.md §5, decisions 5–7).

The kubelet calls Allocate once per container and resource and says nothing about the pod.  We
find the pod in the watch-backed cache of this node's pods (never a cluster-wide LIST) and
serve the container the scheduler meant:

1. **Candidates** (§5.1): ``vgpu-node`` = this node, ``bind-phase=allocating``, not being
   deleted, not in a terminal phase, not tombstoned, a target container T for the resource R
   (the first vGPU container requesting R with R not yet served), ``limits[R]`` of T equal to
   the request size, and — when R is T's primary resource — a non-empty segment that, for
   vgpu-number, has exactly that many devices.
2. **Disambiguation** (§5.2 step 3), each rule skipped when it would leave nobody:
   1. vgpu-number: the segment's GPUs equal the GPUs of the kubelet's device IDs (which
      GetPreferredAllocation steered there);
   2. *(our addition)* the pod whose admission is in progress — the kubelet admits one pod at a
      time and allocates all of its containers in a row, so once a pod's first container has
      been served, the next calls belong to it while it can take them;
   3. smallest ``vgpu-time``; 4. oldest ``creationTimestamp``, then ``namespace/name``.
3. The k-th ``;`` segment belongs to the k-th container that requests vGPU (decision 6);
   only the primary resource's call (vgpu-number, or vgpu-memory for memory-only containers)
   consumes it and returns env/mounts; every other call returns an empty response and
   **never fails** (the §5.1 ordering rule).
4. After each consumed segment the remaining ``devices-to-allocate`` is patched and written
   through to the cache; the last one also sets ``bind-phase=success`` and the done
   ``vgpu-time``, tombstones the pod and releases the node lock.
5. Every failure: Warning Event ``VGPUAllocationFailed`` on the pod, ``bind-phase=failed``,
   done ``vgpu-time``, tombstone, node-lock release, gRPC error with the same text; writes that
   cannot be made now are retried in the background.

One process-wide lock serialises every call (§5).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from vgpu.config.model import MODE_HAMI_CORE, MODE_MIG, EffectiveConfig
from vgpu.hamicore import paths
from vgpu.hamicore.contract import ContractError, DeviceGrant, build_container_contract
from vgpu.kube import events as ev
from vgpu.kube.client import KubeApiError, KubeClient, KubeError, KubeUnavailable
from vgpu.kube.nodelock import release_node_lock
from vgpu.kube.retry import RetryQueue, call_with_retries
from vgpu.nvml.device import GpuInfo
from vgpu.plugin.api import HEALTHY, pb
from vgpu.plugin.devices import ResourceKind
from vgpu.plugin.mig_seam import MigApplier, mig_visible_devices
from vgpu.plugin.preference import id_order, preferred_ids
from vgpu.protocol.pod_model import PodView, ResourceNames, VgpuContainer, pod_view
from vgpu.plugin.responses import AllocationError
from vgpu.protocol import (
    ContainerDevice,
    PodDevices,
    ProtocolError,
    all_consumed,
    allocation_failed,
    allocation_progress,
    consume_segment,
    decode_pod_devices,
    keys,
    segment_gpu_uuids,
    split_segments,
)

if TYPE_CHECKING:
    from vgpu.plugin.resources import ResourceManager

log = logging.getLogger(__name__)

# Error texts (the kubelet shows them as UnexpectedAdmissionError; our Event repeats them).
ERR_MULTIPLE = "multiple Container Requests not supported"
ERR_NO_POD = "cannot get valid pod"
ERR_INIT = "init containers requesting vGPU are not supported"
ERR_INVALID = "invalid devices-to-allocate"
ERR_MODE = "device mode mismatch"

ALLOCATE_BUDGET_S = 8.0
"""Time budget of the API calls of one Allocate or GetPreferredAllocation (the kubelet waits on
them; kubelet-device-plugin-api.md §6: about 10 s at most).  Writes that do not fit go to the
background retry queue."""
OPTIONAL_BUDGET_S = 2.0
"""Budget of API work that only improves a choice: GetPreferredAllocation (advisory; it never
fails) and the re-list when the kubelet's IDs match no candidate's GPUs.  With Allocate's budget
this keeps one admission near 10 s even when every request hangs."""
PATCH_TRIES = 5
PATCH_FIRST_DELAY_S = 0.1


class PodSource(Protocol):
    """Where candidates come from: the node-scoped watch cache (or, for comparison, a LIST)."""

    def items(self) -> list[dict[str, Any]]: ...

    def resync(self) -> None: ...

    def upsert(self, obj: dict[str, Any]) -> bool: ...


@dataclass
class _PodState:
    """The journal of one pod (§5.1): (vGPU-container index, resource) pairs served."""

    served: set[tuple[int, ResourceKind]] = field(default_factory=set)
    tombstoned: bool = False


@dataclass(frozen=True)
class _Candidate:
    view: PodView
    target: VgpuContainer
    primary: bool
    devices: tuple[ContainerDevice, ...] = ()
    tombstone: bool = False


class _Failed(Exception):
    """Internal: a pod-specific failure, handled by the failure path."""


@dataclass
class AllocatorStats:
    allocations: int = 0        # primary calls served
    empty: int = 0              # non-primary / cores calls
    failures: int = 0
    completed: int = 0          # pods that reached bind-phase=success
    resyncs: int = 0
    failed_on_sight: int = 0


class VolcanoAllocator:
    """The :class:`vgpu.plugin.responses.Allocator` of all three resources (one instance, one lock)."""

    def __init__(self, *, node_name: str, client: KubeClient, pods: PodSource,
                 config: Callable[[], EffectiveConfig], hook_path: str = paths.DEFAULT_HOOK_PATH,
                 vgpulock_dir: str = paths.VGPULOCK_DIR, retry: RetryQueue | None = None,
                 mig: MigApplier | None = None, sleep: Callable[[float], None] = time.sleep):
        self.node_name = node_name
        self.client = client
        self.pods = pods
        self.config = config
        self.layout = paths.HostLayout(hook_path=hook_path, vgpulock_dir=vgpulock_dir)
        self.retry = retry or RetryQueue().start()
        self.mig = mig
        self.sleep = sleep
        self.events = ev.EventRecorder(client, node_name)
        self.stats = AllocatorStats()
        self._lock = threading.RLock()
        self._journal: dict[str, _PodState] = {}
        self._views: dict[tuple[str, str], PodView] = {}
        self._decoded: dict[tuple[str, str], PodDevices | ProtocolError] = {}
        self._names: ResourceNames | None = None
        self._active: str | None = None
        self._shortage_warned: set[str] = set()  # pod UIDs already told of a kubelet-side shortage

    # ================================================================ Allocator protocol

    def allocate(self, resource: "ResourceManager", request: pb.AllocateRequest) -> pb.AllocateResponse:
        kind = resource.kind
        if kind is ResourceKind.CORES:
            return pb.AllocateResponse(container_responses=[pb.ContainerAllocateResponse()
                                                            for _ in request.container_requests])
        if len(request.container_requests) != 1:
            raise AllocationError(ERR_MULTIPLE)
        ids = list(request.container_requests[0].devices_ids)
        with self.client.deadline(ALLOCATE_BUDGET_S), self._lock:
            return pb.AllocateResponse(container_responses=[self._allocate(resource, kind, ids)])

    def preferred_allocation(self, resource: "ResourceManager",
                             request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse:
        key = id_order(resource)
        gpu_of = _gpu_of(resource)
        out = []
        with self.client.deadline(OPTIONAL_BUDGET_S), self._lock:
            views = self._current_views()
            for r in request.container_requests:
                targets: tuple[str, ...] = ()
                if resource.kind is ResourceKind.NUMBER:
                    cands = self._live_candidates(views, r.allocation_size)
                    if not cands:
                        # The kubelet may be faster than our watch: one node-scoped LIST, as in Allocate.
                        views = self._resynced_views()
                        cands = self._live_candidates(views, r.allocation_size)
                    if cands:
                        best = self._order(cands)[0]
                        targets = tuple(dict.fromkeys(d.uuid for d in best.devices))
                        log.info("GetPreferredAllocation(%d): steering to %s of pod %s", r.allocation_size,
                                 ",".join(targets), best.view.key)
                        self._warn_kubelet_shortage(resource, views, r, best)
                out.append(pb.ContainerPreferredAllocationResponse(deviceIDs=preferred_ids(
                    r.available_deviceIDs, r.must_include_deviceIDs, r.allocation_size, key, targets, gpu_of)))
        return pb.PreferredAllocationResponse(container_responses=out)

    def _live_candidates(self, views: Sequence[PodView], n: int) -> list[_Candidate]:
        return [c for c in self._candidates(views, ResourceKind.NUMBER, n, None) if not c.tombstone]

    # ================================================================ A-12: kubelet-side shortage

    def _warn_kubelet_shortage(self, resource: "ResourceManager", views: Sequence[PodView],
                               request: pb.ContainerPreferredAllocationRequest, steered: _Candidate) -> None:
        """Warn the pods the kubelet will refuse for want of vgpu-number IDs (known-failures.md A-12).

        When the kubelet has fewer free IDs than a container needs, it rejects the pod itself
        (``Requested N, Available M``) and never calls Allocate, so the plugin cannot see that pod
        being refused.  What it does see is GetPreferredAllocation: without topology alignment the
        kubelet passes *all* its free IDs, so ``available - size`` is exactly what is left for the
        next admissions.  Every other pod waiting here (``bind-phase=allocating``) that still needs
        more than that gets one Warning Event naming the kubelet-side shortage, before the kubelet's
        own ``UnexpectedAdmissionError``.  Only when this call has a candidate: a call for a pod we do
        not know fails in Allocate and the kubelet gets its IDs back.  With several identical
        candidates, the steered one (oldest ``vgpu-time``) is taken for the pod being admitted now,
        as the kubelet admits pods in arrival order.  Allocate itself is untouched."""
        # The steered pod finishes its admission first: all its vgpu-number containers still to come.
        steered_need = sum(n for _, n in self._number_left(steered.view)) or request.allocation_size
        free = max(len(set(request.available_deviceIDs) | set(request.must_include_deviceIDs)) - steered_need, 0)
        live = {v.uid for v in views}
        self._shortage_warned &= live
        healthy: tuple[int, int] | None = None
        for view, refused, requested, available, need in self._waiting_number_needs(views, free):
            if view.uid == steered.view.uid or view.uid in self._shortage_warned:
                continue
            if healthy is None:
                ids = resource.devices()
                healthy = (sum(1 for _, h in ids if h == HEALTHY), len(ids))
            self._shortage_warned.add(view.uid)
            name = resource.resource_name
            self._pod_event(view, ev.REASON_KUBELET_SHORTAGE, (
                f"kubelet-side shortage of {name} device IDs on node {self.node_name}: once pod "
                f"{steered.view.key} is admitted the kubelet has {free} free, but this pod still needs {need}; "
                f"the kubelet will refuse it itself at container {refused} (\"Requested: {requested}, "
                f"Available: {available}\", "
                "UnexpectedAdmissionError) without calling the device plugin, unless IDs are freed first. "
                f"The node advertises {healthy[0]} healthy of {healthy[1]} IDs "
                f"(deviceSplitCount {self.config().split_count} per GPU; unhealthy IDs withheld). The scheduler "
                "counted room for this pod, so the kubelet holds IDs the scheduler does not count "
                "(pods not placed by Volcano, or pods not yet released)."))

    def _waiting_number_needs(self, views: Sequence[PodView], free: int
                              ) -> list[tuple[PodView, str, int, int, int]]:
        """Pods waiting here whose remaining vgpu-number containers do not fit in ``free`` IDs: (pod,
        the container the kubelet refuses, its request, the IDs then free, the pod's remaining need)."""
        out = []
        for v in views:
            if (v.vgpu_node != self.node_name or v.deleting or v.terminal or v.init_requests_vgpu
                    or v.bind_phase != keys.BIND_PHASE_ALLOCATING):
                continue
            st = self._journal.get(v.uid)
            if (st is not None and st.tombstoned) or isinstance(self._decode(v), ProtocolError):
                continue  # done, or failed on sight by the next Allocate: the kubelet is not the problem
            limits = self._number_left(v)
            left = free
            for cname, n in limits:
                if n > left:
                    out.append((v, cname, n, left, sum(m for _, m in limits)))
                    break
                left -= n
        return out

    def _number_left(self, view: PodView) -> list[tuple[str, int]]:
        """(container name, vgpu-number limit) of the pod's vGPU containers not yet served that resource."""
        st = self._journal_of(view)
        return [(c.name, c.limit(ResourceKind.NUMBER) or 0) for c in view.containers
                if c.requests(ResourceKind.NUMBER) and (c.index, ResourceKind.NUMBER) not in st.served]

    # ================================================================ the algorithm (§5.2)

    def _allocate(self, resource: "ResourceManager", kind: ResourceKind, ids: list[str]) -> pb.ContainerAllocateResponse:
        n = len(ids)
        views = self._current_views()
        malformed: list[tuple[PodView, str, bool]] = []
        cands = self._candidates(views, kind, n, malformed)
        live = [c for c in cands if not c.tombstone]
        # The late non-primary call of the pod being admitted (e.g. vgpu-memory after its last
        # container's vgpu-number call): the kubelet admits one pod at a time, so this call is that
        # container's, and no LIST is needed.
        late_call = not live and any(c.view.uid == self._active for c in cands)
        # Step 2: one node-scoped LIST, then look again — when nobody waits for this call, or when the
        # kubelet's IDs lie on GPUs that no waiting pod was assigned: the pod being admitted may be
        # newer than our watch (the other candidates are then the wrong pods).  That second LIST only
        # guards a race, so it gets the short budget and cannot hold up a pod we can serve.
        mismatch = bool(live) and kind is ResourceKind.NUMBER and not self._same_gpus(live, ids, resource)
        if (not live and not late_call) or mismatch:
            with self.client.deadline(OPTIONAL_BUDGET_S if mismatch else ALLOCATE_BUDGET_S):
                views = self._resynced_views()
            malformed.clear()
            cands = self._candidates(views, kind, n, malformed)
        for view, why, _ in malformed:
            self.stats.failed_on_sight += 1
            self._fail_pod(view, f"{ERR_INVALID}: {why}")
        if not cands:
            # A malformed pod that was the only one this primary call could have served: its error.
            meant = [why for _, why, primary in malformed if primary]
            if meant:
                raise AllocationError(f"{ERR_INVALID}: {meant[0]}")
            return self._no_candidate(resource, kind, n)
        pick = self._disambiguate(cands, kind, ids, resource)
        view, target = pick.view, pick.target
        try:
            if view.init_requests_vgpu:
                raise _Failed(ERR_INIT)
            if not pick.primary:
                self._journal_of(view).served.add((target.index, kind))
                self.stats.empty += 1
                log.info("%s: %s for container %s of %s is not its primary resource: empty response",
                         resource.resource_name, n, target.name, view.key)
                return pb.ContainerAllocateResponse()
            resp = self._serve(resource, view, target, pick.devices)
        except _Failed as exc:
            self._fail_pod(view, str(exc))
            raise AllocationError(str(exc)) from None
        self._journal_of(view).served.add((target.index, kind))
        return resp

    def _no_candidate(self, resource: "ResourceManager", kind: ResourceKind, n: int) -> pb.ContainerAllocateResponse:
        if kind is ResourceKind.MEMORY:
            # The ordering rule: a memory call never fails admission.
            self._node_event(ev.REASON_UNLIMITED_CONTAINER,
                             f"Allocate of {n} {resource.resource_name} matched no pod waiting for it on node "
                             f"{self.node_name}; that container runs without HAMi-core limits")
            self.stats.empty += 1
            return pb.ContainerAllocateResponse()
        self.stats.failures += 1
        release_node_lock(self.client, self.node_name, queue=self.retry, sleep=self.sleep)
        self._node_event(ev.REASON_NO_POD,
                         f"{ERR_NO_POD}: Allocate of {n} {resource.resource_name} found no pod on node "
                         f"{self.node_name} with {keys.BIND_PHASE}={keys.BIND_PHASE_ALLOCATING} asking for it")
        raise AllocationError(ERR_NO_POD)

    # ---------------------------------------------------------------- candidates

    def _current_views(self) -> list[PodView]:
        names = ResourceNames.from_config(self.config())
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
            live.add(k)
            views.append(v)
        if len(self._views) > len(live):
            for k in [k for k in self._views if k not in live]:
                del self._views[k]
                self._decoded.pop(k, None)
        uids = {v.uid for v in views}
        for uid in [u for u in self._journal if u not in uids]:
            del self._journal[uid]  # the pod left the cache: its journal and tombstone go too
        return views

    def _decode(self, view: PodView) -> PodDevices | ProtocolError:
        k = (view.uid, view.resource_version)
        got = self._decoded.get(k)
        if got is None:
            dta = view.devices_to_allocate
            if dta is None:
                got = ProtocolError(keys.DEVICES_TO_ALLOCATE, "", "missing on a pod with bind-phase=allocating")
            else:
                try:
                    got = decode_pod_devices(dta)
                    if len(got) != len(view.containers):
                        got = ProtocolError(keys.DEVICES_TO_ALLOCATE, "",
                                            f"has {len(got)} segment(s) but the pod has {len(view.containers)} "
                                            "container(s) requesting vGPU", dta)
                except ProtocolError as exc:
                    got = exc
            self._decoded[k] = got
        return got

    def _journal_of(self, view: PodView) -> _PodState:
        st = self._journal.get(view.uid)
        if st is None:
            st = _PodState()
            dta = view.devices_to_allocate
            if dta is not None:
                segs = split_segments(dta)
                if len(segs) == len(view.containers):
                    # Entering mid-admission (after a plugin restart): consumed segments are served.
                    for c in view.containers:
                        if not segs[c.index]:
                            st.served.update((c.index, k) for k in c.kinds)
            self._journal[view.uid] = st
        return st

    @staticmethod
    def _target(view: PodView, st: _PodState, kind: ResourceKind) -> VgpuContainer | None:
        for c in view.containers:
            if c.requests(kind) and (c.index, kind) not in st.served:
                return c
        return None

    def _candidates(self, views: Sequence[PodView], kind: ResourceKind, n: int,
                    malformed: list[tuple[PodView, str, bool]] | None) -> list[_Candidate]:
        """Candidates for a call (R=``kind``, n) per §5.1; malformed allocating pods go to ``malformed``
        as (pod, decode error, whether it would have been a primary candidate of this call)."""
        out: list[_Candidate] = []
        for v in views:
            if v.vgpu_node != self.node_name or v.deleting or v.terminal:
                continue
            st = self._journal.get(v.uid)
            if st is not None and st.tombstoned:
                # Never a primary candidate again; still recognised for a late non-primary call.
                t = self._target(v, st, kind)
                if t is not None and t.primary is not kind and t.limit(kind) == n:
                    out.append(_Candidate(v, t, False, tombstone=True))
                continue
            if v.bind_phase != keys.BIND_PHASE_ALLOCATING:
                continue
            decoded = self._decode(v)
            st = self._journal_of(v)
            t = self._target(v, st, kind)
            init = next((c for c in v.init_containers if c.limit(kind) == n), None)
            if init is not None and not isinstance(decoded, ProtocolError):
                # The kubelet calls init containers first: this call may be one. Such pods always fail.
                out.append(_Candidate(v, init, True))
                continue
            if isinstance(decoded, ProtocolError):
                if malformed is not None and all(m.uid != v.uid for m, _, _ in malformed):
                    meant = t is not None and t.limit(kind) == n and t.primary is kind
                    malformed.append((v, str(decoded), meant))
                continue
            if t is None or t.limit(kind) != n:
                continue
            if t.primary is kind:
                devs = decoded[t.index]
                if not devs or (kind is ResourceKind.NUMBER and len(devs) != n):
                    continue
                out.append(_Candidate(v, t, True, devs))
            else:
                out.append(_Candidate(v, t, False))
        return out

    def _order(self, cands: Sequence[_Candidate]) -> list[_Candidate]:
        """Rules 2–4: the pod in progress, then smallest vgpu-time, oldest creation, name."""
        return sorted(cands, key=lambda c: (c.view.uid != self._active, c.tombstone, c.view.order_key))

    def _resynced_views(self) -> list[PodView]:
        """One node-scoped LIST into the pod cache (never cluster-wide), then the current views."""
        try:
            self.pods.resync()
            self.stats.resyncs += 1
        except KubeError as exc:
            log.warning("pod cache resync failed: %s", exc)
        return self._current_views()

    @staticmethod
    def _same_gpus(cands: list[_Candidate], ids: Sequence[str], resource: "ResourceManager") -> list[_Candidate]:
        """The candidates whose assigned GPUs are exactly the GPUs of the kubelet's device IDs."""
        gpu_of = _gpu_of(resource)
        asked = frozenset(gpu_of(i) for i in ids)
        return [c for c in cands if segment_gpu_uuids(c.devices) == asked]

    def _disambiguate(self, cands: list[_Candidate], kind: ResourceKind, ids: Sequence[str],
                      resource: "ResourceManager") -> _Candidate:
        if len(cands) > 1 and kind is ResourceKind.NUMBER:
            same = self._same_gpus(cands, ids, resource)
            if same:
                cands = same
        pick = self._order(cands)[0]
        if len(cands) > 1:
            log.info("%d candidate pods for %s; chose %s (in progress: %s)", len(cands), kind.value,
                     pick.view.key, pick.view.uid == self._active)
        return pick

    # ---------------------------------------------------------------- serving a primary call

    def _serve(self, resource: "ResourceManager", view: PodView, target: VgpuContainer,
               devices: Sequence[ContainerDevice]) -> pb.ContainerAllocateResponse:
        cfg = self.config()
        gpus = {g.uuid: g for g in resource.gpus}
        mode = cfg.operating_mode
        for d in devices:
            if d.uuid not in gpus:
                raise _Failed(f"assigned GPU {d.uuid} is not on this node")
            if not resource.health.is_healthy(d.uuid):
                raise _Failed(f"assigned GPU {d.uuid} is unhealthy")
            if (mode == MODE_HAMI_CORE) == (d.mig is not None):
                raise _Failed(f"{ERR_MODE}: node mode is {mode}, device id is {d.device_id}")
        zero: tuple[int, ...] = ()
        if mode == MODE_MIG:
            resp = self._mig_response(view, devices)
        else:
            resp, zero = self._hami_core_response(cfg, gpus, view, target, devices)
        remaining = consume_segment(view.devices_to_allocate or "", target.index)
        done = all_consumed(remaining)
        annotations = allocation_progress(remaining)
        try:
            pod = call_with_retries(
                lambda: self.client.patch_pod_annotations(view.namespace, view.name, annotations),
                tries=PATCH_TRIES, first_delay=PATCH_FIRST_DELAY_S, sleep=self.sleep)
        except KubeError as exc:
            transient = isinstance(exc, KubeUnavailable) or (isinstance(exc, KubeApiError) and exc.status >= 500)
            if not (done and transient):
                raise _Failed(f"cannot record the allocation on pod {view.key}: {exc}") from None
            # Only the completion could not be written: the container is served; keep trying.
            log.warning("pod %s: success patch failed (%s); retrying in the background", view.key, exc)
            self.retry.submit(f"bind-phase=success on pod {view.key}",
                              lambda: self._write_through(self.client.patch_pod_annotations(
                                  view.namespace, view.name, annotations)),
                              still_needed=lambda: self._in_cache(view.uid))
        else:
            self._write_through(pod)
        self.stats.allocations += 1
        self._active = view.uid
        log.info("pod %s container %s: %s", view.key, target.name,
                 ", ".join(f"{d.device_id} {d.usedmem}/{d.usedcores}%" for d in devices))
        if done:
            self._journal_of(view).tombstoned = True
            self.stats.completed += 1
            release_node_lock(self.client, self.node_name, queue=self.retry, sleep=self.sleep)
            log.info("pod %s: every container served; bind-phase=success", view.key)
        if zero:
            self._pod_event(view, ev.REASON_ZERO_MEMORY_LIMIT,
                            f"container {target.name}: CUDA_DEVICE_MEMORY_LIMIT_{'/'.join(map(str, zero))}=0m, "
                            "which HAMi-core treats as unlimited memory")
        return resp

    def _hami_core_response(self, cfg: EffectiveConfig, gpus: Mapping[str, GpuInfo], view: PodView,
                            target: VgpuContainer, devices: Sequence[ContainerDevice]
                            ) -> tuple[pb.ContainerAllocateResponse, tuple[int, ...]]:
        try:
            paths.check_hami_core_files(self.layout)
        except paths.HamiCoreFilesMissing as exc:
            raise _Failed(str(exc)) from None
        # In-container NVML order: ascending PCI bus id of the physical GPUs (§5.3).
        ordered = sorted(devices, key=lambda d: gpus[d.uuid].pci_bus_id.lower())
        try:
            contract = build_container_contract(
                devices=[DeviceGrant(d.uuid, d.usedmem, d.usedcores) for d in ordered],
                pod_uid=view.uid, container_name=target.name, hook_path=self.layout.hook_path,
                cuda_disable_control=target.disable_control, gpu_core_policy=cfg.device.gpu_core_policy,
                lib_cuda_log_level=cfg.lib_cuda_log_level, memory_factor=cfg.gpu_memory_factor,
                vgpulock_dir=self.layout.vgpulock_dir)
            paths.prepare_container_dir(self.layout, view.uid, target.name)
        except (ContractError, paths.HostPathError, OSError, ValueError) as exc:
            raise _Failed(f"cannot prepare HAMi-core for container {target.name}: {exc}") from None
        resp = pb.ContainerAllocateResponse(
            envs=contract.envs,
            mounts=[pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
                    for m in contract.mounts])
        return resp, contract.zero_memory_devices

    def _mig_response(self, view: PodView, devices: Sequence[ContainerDevice]) -> pb.ContainerAllocateResponse:
        try:
            uuids = mig_visible_devices(self.mig, devices, view, self._current_views())
        except AllocationError as exc:
            raise _Failed(str(exc)) from None
        return pb.ContainerAllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(uuids)})

    # ---------------------------------------------------------------- failure path

    def _fail_pod(self, view: PodView, message: str) -> None:
        """Event, bind-phase=failed, tombstone, lock release (§5.2 failure path); never raises."""
        self.stats.failures += 1
        self._journal_of(view).tombstoned = True
        if self._active == view.uid:
            self._active = None
        log.warning("pod %s: allocation failed: %s", view.key, message)
        unreachable = False

        def attempt(what: str, fn: Callable[[], object]) -> None:
            nonlocal unreachable
            if not unreachable:
                try:
                    fn()
                    return
                except KubeApiError as exc:
                    if exc.not_found:
                        return
                    log.warning("%s: %s", what, exc)
                except KubeError as exc:
                    unreachable = isinstance(exc, KubeUnavailable)
                    log.warning("%s: %s", what, exc)
            self.retry.submit(what, fn, still_needed=lambda: self._in_cache(view.uid))

        attempt(f"event {ev.REASON_ALLOCATION_FAILED} on pod {view.key}",
                lambda: self.events.pod_event(view.raw, ev.REASON_ALLOCATION_FAILED, message))
        attempt(f"bind-phase=failed on pod {view.key}",
                lambda: self._write_through(self.client.patch_pod_annotations(
                    view.namespace, view.name, allocation_failed())))
        if unreachable:
            self.retry.submit(f"release node lock hamivgpu on {self.node_name}",
                              lambda: self.client.patch_node(self.node_name, _lock_release_body()))
        else:
            release_node_lock(self.client, self.node_name, queue=self.retry, sleep=self.sleep)

    # ---------------------------------------------------------------- I/O helpers

    def _write_through(self, pod: object) -> None:
        if isinstance(pod, dict):
            self.pods.upsert(pod)

    def _in_cache(self, uid: str) -> bool:
        return any((p.get("metadata") or {}).get("uid") == uid for p in self.pods.items())

    def _pod_event(self, view: PodView, reason: str, message: str) -> None:
        try:
            self.events.pod_event(view.raw, reason, message)
        except KubeError as exc:
            log.warning("cannot post event %s on pod %s: %s", reason, view.key, exc)
            self.retry.submit(f"event {reason} on pod {view.key}",
                              lambda: self.events.pod_event(view.raw, reason, message),
                              still_needed=lambda: self._in_cache(view.uid))

    def _node_event(self, reason: str, message: str) -> None:
        log.warning("node %s: %s", self.node_name, message)
        try:
            self.events.node_event(self.node_name, reason, message)
        except KubeError as exc:
            log.warning("cannot post event %s on node %s: %s", reason, self.node_name, exc)
            self.retry.submit(f"event {reason} on node {self.node_name}",
                              lambda: self.events.node_event(self.node_name, reason, message))


def _lock_release_body() -> dict[str, Any]:
    from vgpu.protocol import node_lock_release_patch
    return node_lock_release_patch()


def _gpu_of(resource: "ResourceManager") -> Callable[[str], str | None]:
    def gpu_of(device_id: str) -> str | None:
        found = resource.locate(device_id)
        return found[0].uuid if found else None
    return gpu_of
