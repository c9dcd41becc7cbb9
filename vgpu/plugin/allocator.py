"""Allocate and GetPreferredAllocation for the Volcano protocol (docs/protocol.md §5, docs/decisions.md decisions 5–7).

The kubelet calls Allocate once per container and resource and says nothing about the pod;
:class:`VolcanoAllocator` serves the container the scheduler meant, as one sequence:

1. **find the pod** among this node's pod views (:mod:`vgpu.kube.pod_views`, from the watch
   cache; never a cluster-wide LIST), re-listed once, node-scoped, when the call finds nobody
   or the kubelet's IDs match no candidate's GPUs (docs/protocol.md §5.2 step 2);
2. **match** (:mod:`vgpu.plugin.matching`, pure): candidate, container, segment; a non-primary
   call is answered empty and never fails;
3. **prepare the host and build the contract**: :func:`vgpu.hamicore.host.prepare_container`
   (hami-core), :func:`vgpu.plugin.mig_seam.mig_visible_devices` (mig);
4. **write the progress** (:mod:`vgpu.plugin.pod_writes`): remaining ``devices-to-allocate``,
   with the last segment ``bind-phase=success``, tombstone and node-lock release;
5. **respond** (:func:`vgpu.plugin.responses.container_response`) **or fail**: Event
   ``VGPUAllocationFailed``, ``bind-phase=failed``, tombstone, lock release, the same text as gRPC error.

GetPreferredAllocation steers to the candidate's GPUs (:mod:`vgpu.plugin.preference`) and names
kubelet-side shortages (:mod:`vgpu.plugin.shortage`).  One process-wide lock serialises every call
(docs/protocol.md §5).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vgpu.config.model import MODE_MIG, EffectiveConfig
from vgpu.hamicore import paths
from vgpu.hamicore.contract import DeviceGrant
from vgpu.hamicore.host import ContainerPrepareError, prepare_container
from vgpu.kube import events as ev
from vgpu.kube.client import KubeClient, KubeError
from vgpu.kube.pod_views import PodSource, PodViews
from vgpu.kube.retry import RetryQueue
from vgpu.logfmt import context
from vgpu.plugin import matching
from vgpu.plugin.api import pb
from vgpu.plugin.devices import ResourceKind, memory_units
from vgpu.plugin.mig_seam import MigApplier, mig_visible_devices
from vgpu.plugin.overcommit import OvercommitGuard
from vgpu.plugin.pod_writes import PodWriter
from vgpu.plugin.preference import gpu_of, id_order, numa_of, preferred_ids
from vgpu.plugin.responses import (
    REASON_DEVICE,
    REASON_HOST,
    REASON_NO_POD,
    REASON_OVERCOMMIT,
    REASON_UNHEALTHY,
    AllocationError,
    container_response,
)
from vgpu.plugin.shortage import KubeletShortage
from vgpu.protocol import ContainerDevice, keys
from vgpu.protocol.pod_model import PodView, ResourceNames, VgpuContainer

if TYPE_CHECKING:
    from vgpu.plugin.resources import ResourceManager

log = logging.getLogger(__name__)

# Error texts (the kubelet shows them as UnexpectedAdmissionError; our Event repeats them).
ERR_MULTIPLE = "multiple Container Requests not supported"
ERR_NO_POD = "cannot get valid pod"
ERR_INIT = "init containers requesting vGPU are not supported"
ERR_INVALID = matching.ERR_INVALID
ERR_LIMIT = matching.ERR_LIMIT
ERR_MODE = matching.ERR_MODE

ALLOCATE_BUDGET_S = 8.0
"""Time budget of the API calls of one Allocate or GetPreferredAllocation (the kubelet waits on
them; docs/kubelet-api.md §6: about 10 s at most).  Writes that do not fit go to the
background retry queue."""
OPTIONAL_BUDGET_S = 2.0
"""Budget of API work that only improves a choice: GetPreferredAllocation (advisory; it never
fails) and the re-list when the kubelet's IDs match no candidate's GPUs.  With Allocate's budget
this keeps one admission near 10 s even when every request hangs."""


@dataclass
class AllocatorStats:
    allocations: int = 0  # primary calls served
    empty: int = 0  # non-primary / cores calls
    failures: int = 0
    completed: int = 0  # pods that reached bind-phase=success
    resyncs: int = 0
    failed_on_sight: int = 0


class VolcanoAllocator:
    """The :class:`vgpu.plugin.responses.Allocator` of all three resources (one instance, one lock)."""

    def __init__(
        self,
        *,
        node_name: str,
        client: KubeClient,
        pods: PodSource,
        config: Callable[[], EffectiveConfig],
        hook_path: str = paths.DEFAULT_HOOK_PATH,
        vgpulock_dir: str = paths.VGPULOCK_DIR,
        retry: RetryQueue | None = None,
        mig: MigApplier | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.node_name = node_name
        self.client = client
        self.pods = PodViews(pods)
        self.config = config
        self.layout = paths.HostLayout(hook_path=hook_path, vgpulock_dir=vgpulock_dir)
        self.retry = retry or RetryQueue().start()
        self.mig = mig
        self.writes = PodWriter(client, node_name, self.pods, self.retry, sleep)
        self.events = self.writes.events
        self.stats = AllocatorStats()
        self.journal = matching.Journal()
        self.shortage = KubeletShortage(node_name)
        self.overcommit = OvercommitGuard(node_name)
        self._lock = threading.RLock()
        self._active: str | None = None  # UID of the pod whose admission is in progress

    # ================================================================ Allocator protocol

    def allocate(self, resource: ResourceManager, request: pb.AllocateRequest) -> pb.AllocateResponse:
        if resource.kind is ResourceKind.CORES:
            return pb.AllocateResponse(container_responses=[container_response() for _ in request.container_requests])
        if len(request.container_requests) != 1:
            raise AllocationError(ERR_MULTIPLE)
        ids = list(request.container_requests[0].devices_ids)
        with self.client.deadline(ALLOCATE_BUDGET_S), self._lock:
            return pb.AllocateResponse(container_responses=[self._allocate(resource, ids)])

    def preferred_allocation(
        self, resource: ResourceManager, request: pb.PreferredAllocationRequest
    ) -> pb.PreferredAllocationResponse:
        key, uuid_of, node_of, out = id_order(resource), gpu_of(resource), numa_of(resource), []
        with self.client.deadline(OPTIONAL_BUDGET_S), self._lock:
            views = self._views()
            for r in request.container_requests:
                targets: tuple[str, ...] = ()
                if resource.kind is ResourceKind.NUMBER:
                    cands = matching.live(self._candidates(views, ResourceKind.NUMBER, r.allocation_size))
                    if not cands:
                        # The kubelet may be faster than our watch: one node-scoped LIST, as in Allocate.
                        views = self._resynced_views()
                        cands = matching.live(self._candidates(views, ResourceKind.NUMBER, r.allocation_size))
                    if cands:
                        best = matching.order(cands, self._active)[0]
                        targets = tuple(dict.fromkeys(d.uuid for d in best.devices))
                        log.info(
                            "GetPreferredAllocation(%d): steering to %s of pod %s",
                            r.allocation_size,
                            ",".join(targets),
                            best.view.key,
                        )
                        for view, message in self.shortage.warnings(
                            resource, views, r, best, self.journal, self.config().split_count
                        ):
                            self.writes.pod_event(view, ev.REASON_KUBELET_SHORTAGE, message)
                out.append(
                    pb.ContainerPreferredAllocationResponse(
                        deviceIDs=preferred_ids(
                            r.available_deviceIDs,
                            r.must_include_deviceIDs,
                            r.allocation_size,
                            key,
                            targets,
                            uuid_of,
                            node_of,
                        )
                    )
                )
        return pb.PreferredAllocationResponse(container_responses=out)

    # ========================================================= the sequence (docs/protocol.md §5.2)

    def _allocate(self, resource: ResourceManager, ids: list[str]) -> pb.ContainerAllocateResponse:
        kind, n, uuid_of = resource.kind, len(ids), gpu_of(resource)
        malformed: list[matching.Malformed] = []
        cands = self._candidates(self._waiting_views(), kind, n, malformed)
        why = matching.relist(cands, kind, ids, uuid_of, self._active)
        if why is not None:  # step 2: one node-scoped LIST, then look again
            with self.client.deadline(OPTIONAL_BUDGET_S if why == matching.RELIST_MISMATCH else ALLOCATE_BUDGET_S):
                views = self._resynced_views()
            malformed.clear()
            cands = self._candidates(views, kind, n, malformed)
        for m in malformed:
            self.stats.failed_on_sight += 1
            self._fail_pod(m.view, m.why)
        if not cands:
            # A malformed pod that was the only one this primary call could have served: its error.
            meant = [m.why for m in malformed if m.meant]
            if meant:
                raise AllocationError(meant[0])
            return self._no_candidate(resource, kind, n)
        pick = matching.choose(cands, kind, ids, uuid_of, self._active)
        if len(cands) > 1:
            log.info(
                "%d candidate pods for %s; chose %s (in progress: %s)",
                len(cands),
                kind.value,
                pick.view.key,
                pick.view.uid == self._active,
            )
        view, target = pick.view, pick.target
        try:
            if view.init_requests_vgpu:
                raise AllocationError(ERR_INIT)
            if not pick.primary:
                self.stats.empty += 1
                log.info(
                    "%s: %s for container %s of %s is not its primary resource: empty response",
                    resource.resource_name,
                    n,
                    target.name,
                    view.key,
                )
                resp = container_response()
            else:
                resp = self._serve(resource, view, target, pick.devices)
        except AllocationError as exc:
            self._fail_pod(view, str(exc))
            raise
        self.journal.of(view).served.add((target.index, kind))
        return resp

    def _serve(
        self, resource: ResourceManager, view: PodView, target: VgpuContainer, devices: Sequence[ContainerDevice]
    ) -> pb.ContainerAllocateResponse:
        """A primary call: check the devices, prepare the container, record the progress."""
        cfg = self.config()
        gpus = {g.uuid: g for g in resource.gpus}
        problem = matching.device_problem(devices, gpus, resource.health.is_healthy, cfg.operating_mode)
        if problem is not None:
            unhealthy = any(not resource.health.is_healthy(d.uuid) for d in devices if d.uuid in gpus)
            raise AllocationError(problem, reason=REASON_UNHEALTHY if unhealthy else REASON_DEVICE)
        zero: tuple[int, ...] = ()
        if cfg.operating_mode == MODE_MIG:
            uuids = mig_visible_devices(self.mig, devices, view, self._views())
            resp = container_response({"NVIDIA_VISIBLE_DEVICES": ",".join(uuids)})
        else:
            # A scheduler that lost count must not over-commit a GPU (docs/decisions.md decision 11).
            # Only the pods that can hold these GPUs are read: an index, not a scan of the node.
            held_uuids = [d.uuid for d in devices]
            holding = self.pods.assigned_to(
                ResourceNames.from_config(self.config()), held_uuids, self.overcommit.holders(held_uuids)
            )
            over = self.overcommit.problem(
                holding,
                view,
                target.index,
                target.name,
                devices,
                lambda u: memory_units(gpus[u], cfg.gpu_memory_factor),
                cfg.gpu_memory_factor,
                alive=self.pods.uids(),
            )
            if over is not None:
                raise AllocationError(over, reason=REASON_OVERCOMMIT)
            # In-container NVML order: ascending PCI bus id of the physical GPUs (docs/protocol.md §5.3).
            ordered = sorted(devices, key=lambda d: gpus[d.uuid].pci_bus_id.lower())
            try:
                contract = prepare_container(
                    self.layout,
                    devices=[DeviceGrant(d.uuid, d.usedmem, d.usedcores) for d in ordered],
                    pod_uid=view.uid,
                    container_name=target.name,
                    cuda_disable_control=target.disable_control,
                    gpu_core_policy=cfg.device.gpu_core_policy,
                    lib_cuda_log_level=cfg.lib_cuda_log_level,
                    memory_factor=cfg.gpu_memory_factor,
                )
            except ContainerPrepareError as exc:
                raise AllocationError(str(exc), reason=REASON_HOST) from None
            resp, zero = container_response(contract.envs, contract.mounts), contract.zero_memory_devices
            self.overcommit.granted(view.uid, devices)
        done = self.writes.progress(view, target)
        self.stats.allocations += 1
        self._active = view.uid
        log.info(
            "pod %s container %s: %s",
            view.key,
            target.name,
            ", ".join(f"{d.device_id} {d.usedmem}/{d.usedcores}%" for d in devices),
            extra=context(pod=view.key, container=target.name),
        )
        if done:
            self.journal.of(view).tombstoned = True
            self.stats.completed += 1
            self.writes.release_lock()
            log.info("pod %s: every container served; bind-phase=success", view.key, extra=context(pod=view.key))
        if zero:
            self.writes.pod_event(
                view,
                ev.REASON_ZERO_MEMORY_LIMIT,
                f"container {target.name}: CUDA_DEVICE_MEMORY_LIMIT_{'/'.join(map(str, zero))}=0m, "
                "which HAMi-core treats as unlimited memory",
            )
        return resp

    def _no_candidate(self, resource: ResourceManager, kind: ResourceKind, n: int) -> pb.ContainerAllocateResponse:
        if kind is ResourceKind.MEMORY:
            # The ordering rule: a memory call never fails admission.
            self.writes.node_event(
                ev.REASON_UNLIMITED_CONTAINER,
                f"Allocate of {n} {resource.resource_name} matched no pod waiting for it on node "
                f"{self.node_name}; that container runs without HAMi-core limits",
            )
            self.stats.empty += 1
            return container_response()
        self.stats.failures += 1
        self.writes.release_lock()
        self.writes.node_event(
            ev.REASON_NO_POD,
            f"{ERR_NO_POD}: Allocate of {n} {resource.resource_name} found no pod on node "
            f"{self.node_name} with {keys.BIND_PHASE}={keys.BIND_PHASE_ALLOCATING} asking for it",
        )
        raise AllocationError(ERR_NO_POD, reason=REASON_NO_POD)

    def _fail_pod(self, view: PodView, message: str) -> None:
        """Tombstone, then Event, bind-phase=failed, lock release; never raises.

        The failure path of docs/protocol.md §5.2.
        """
        self.stats.failures += 1
        self.journal.of(view).tombstoned = True
        if self._active == view.uid:
            self._active = None
        log.warning("pod %s: allocation failed: %s", view.key, message, extra=context(pod=view.key))
        self.writes.failed(view, message)

    # ================================================================ pod views

    def _views(self) -> list[PodView]:
        views = self.pods.current(ResourceNames.from_config(self.config()))
        self.journal.keep_only(v.uid for v in views)
        return views

    def _waiting_views(self) -> list[PodView]:
        """The pods an Allocate may be for (allocating, or tombstoned here): an index, not a scan."""
        views = self.pods.waiting(ResourceNames.from_config(self.config()), self.journal.tombstoned_uids())
        self.journal.keep_only(self.pods.uids())
        return views

    def _resynced_views(self) -> list[PodView]:
        """One node-scoped LIST into the pod cache (never cluster-wide), then the current views."""
        try:
            self.pods.resync()
            self.stats.resyncs += 1
        except KubeError as exc:
            log.warning("pod cache resync failed: %s", exc)
        return self._views()

    def _candidates(
        self, views: Sequence[PodView], kind: ResourceKind, n: int, malformed: list[matching.Malformed] | None = None
    ) -> list[matching.Candidate]:
        return matching.candidates(views, kind, n, self.node_name, self.journal, malformed)
