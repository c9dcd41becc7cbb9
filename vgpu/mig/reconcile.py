"""Bring one GPU to a group's geometry through NVML, touching as little as possible (docs/mig.md §5.2).

1. Read the existing instances; the desired set is the plan's (profileId, start) per position.
2. Every GPU instance outside the desired set must go.  Before destroying anything, the
   GPU's running processes are checked: one on a doomed instance (or on the whole GPU) fails
   the apply with ``MIG instance GI <id> on <uuid> is in use; not reshaping`` and **nothing is
   destroyed** (docs/failures.md G-3).  Then each doomed GI loses its compute instances and
   itself; ``NVML_ERROR_IN_USE`` there (a process started since the check) fails the same way.
3. Missing desired GPU instances are created in position order with explicit placements;
   a desired GI without its full compute instance only gets the CI.  On any error everything
   this call created is destroyed again (newest first) and the apply fails with
   ``MIG apply failed on <uuid>: <nvml error>`` (docs/failures.md G-2).
4. An instance of the plan is never destroyed.  A desired GI that holds only partial compute
   instances (made by hand) has those destroyed, if idle, so the full CI fits **(our choice)**.

Crash safety: nothing is remembered between calls; every apply starts from what NVML reports.
A process killed between two steps leaves instances that the next apply either keeps (part of
the plan; a CI-less GI just gets its CI) or destroys (idle, not in the plan), so re-running
converges.  The caller holds the GPU's lock (one apply, destroy or resolve at a time per GPU).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vgpu.mig.errors import MigApplyError, MigInUseError, MigResolveError
from vgpu.mig.existing import CiProfileCache, ExistingGi, mig_device_uuids, read_existing, read_gpu_instance
from vgpu.mig.plan import GroupPlan
from vgpu.mig.profiles import ProfileCatalog
from vgpu.nvml.errors import NVML_ERROR_IN_USE, NvmlError
from vgpu.nvml.mig_calls import ComputeInstance, DeviceHandle, GpuInstance, MigNvml, Placement

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MigStep:
    """One NVML mutation of an apply, reported to the observer as it completes."""

    action: str  # "destroy-ci" | "destroy-gi" | "create-gi" | "create-ci" | "rollback-ci" | "rollback-gi"
    gpu_uuid: str
    gpu_instance_id: int
    compute_instance_id: int | None = None
    position: int | None = None


Observer = Callable[[MigStep], None]


@dataclass(frozen=True)
class MigInstanceInfo:
    """Position ``position`` of group ``group`` on GPU ``gpu_uuid``: its instance and MIG device."""

    gpu_uuid: str
    group: str
    position: int
    profile: str  # the geometry's instance name, e.g. "2g.20gb"
    profile_id: int
    placement: Placement
    gpu_instance_id: int
    compute_instance_id: int
    mig_uuid: str


@dataclass(frozen=True)
class ApplyResult:
    gpu_uuid: str
    group: str
    devices: tuple[MigInstanceInfo, ...]  # index = position
    destroyed: tuple[int, ...] = ()  # GI ids destroyed by this apply
    created: tuple[int, ...] = ()  # positions whose GI and/or CI this apply created

    def device(self, position: int) -> MigInstanceInfo:
        return self.devices[position]


@dataclass(frozen=True)
class Busy:
    """Which GPU instances have processes (from the parent device's process list)."""

    gpu_instance_ids: frozenset[int]
    whole_gpu: int = 0  # processes not attributed to a MIG instance
    known: bool = True  # False: the process list was unavailable or truncated


BusyProbe = Callable[[], Busy]

# Results of earlier applies/resolves of one GPU, reused when NVML reports the same instances
# again (they are immutable values, so handing out the same object is indistinguishable from a
# new equal one; building ~10 frozen dataclasses per call cost more than the NVML reads).
# Owned by the caller (``MigGpu.memo``), used under the GPU's lock; bounded by _MEMO_MAX.
ResultMemo = dict[Any, Any]
_MEMO_MAX = 1024


def _instance_info(
    memo: ResultMemo | None, uuid: str, group: str, inst: Any, gi_id: int, ci_id: int, mig_uuid: str
) -> MigInstanceInfo:
    if memo is None:
        return MigInstanceInfo(
            uuid, group, inst.position, inst.name, inst.profile.profile_id, inst.placement, gi_id, ci_id, mig_uuid
        )
    key = (uuid, group, inst.position, gi_id, ci_id, mig_uuid)
    hit = memo.get(key)
    if hit is not None and hit[0] is inst:  # the same planned instance (memo holds it: no id reuse)
        return hit[1]
    info = MigInstanceInfo(
        uuid, group, inst.position, inst.name, inst.profile.profile_id, inst.placement, gi_id, ci_id, mig_uuid
    )
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[key] = (inst, info)
    return info


def _notify(observer: Observer | None, step: MigStep) -> None:
    log.debug(
        "MIG %s on %s: GI %s CI %s (position %s)",
        step.action,
        step.gpu_uuid,
        step.gpu_instance_id,
        step.compute_instance_id,
        step.position,
    )
    if observer is not None:
        observer(step)


def _check_idle(uuid: str, doomed: Iterable[ExistingGi], busy: Busy) -> None:
    doomed = list(doomed)
    if doomed and not busy.known:
        # Cannot prove the GPU idle up front; NVML's own IN_USE answer on destroy still protects
        # running work (docs/mig.md §5.2 step 5), but an idle instance may go before a busy one stops us.
        log.warning(
            "MIG %s: process list unavailable or truncated; relying on NVML's in-use check to protect GPU instances %s",
            uuid,
            ", ".join(str(gi.id) for gi in doomed),
        )
    for gi in doomed:
        if busy.whole_gpu:
            raise MigInUseError(uuid, gi.id, f"{busy.whole_gpu} process(es) run on the GPU outside MIG instances")
        if gi.id in busy.gpu_instance_ids:
            raise MigInUseError(uuid, gi.id, "processes are running on it")


def _destroy_ci(
    nvml: MigNvml, uuid: str, gi: ExistingGi, ci_handle: ComputeInstance, ci_id: int, observer: Observer | None
) -> None:
    try:
        nvml.destroy_compute_instance(ci_handle)
    except NvmlError as exc:
        if exc.code == NVML_ERROR_IN_USE:
            raise MigInUseError(uuid, gi.id, f"compute instance {ci_id}: {exc.message}") from None
        raise MigApplyError(uuid, exc) from None
    _notify(observer, MigStep("destroy-ci", uuid, gi.id, ci_id))


def _destroy_gi(nvml: MigNvml, uuid: str, gi: ExistingGi, observer: Observer | None) -> None:
    for ci in list(gi.cis):
        _destroy_ci(nvml, uuid, gi, ci.handle, ci.id, observer)
        gi.cis.remove(ci)
    try:
        nvml.destroy_gpu_instance(gi.handle)
    except NvmlError as exc:
        if exc.code == NVML_ERROR_IN_USE:
            raise MigInUseError(uuid, gi.id, exc.message) from None
        raise MigApplyError(uuid, exc) from None
    _notify(observer, MigStep("destroy-gi", uuid, gi.id))


def _rollback(
    nvml: MigNvml,
    uuid: str,
    cis: list[tuple[ComputeInstance, int, int]],
    gis: list[tuple[GpuInstance, int]],
    observer: Observer | None,
) -> None:
    """Destroy what this apply created, newest first; failures are logged, never raised."""
    for ci_handle, gi_id, ci_id in reversed(cis):
        try:
            nvml.destroy_compute_instance(ci_handle)
            _notify(observer, MigStep("rollback-ci", uuid, gi_id, ci_id))
        except NvmlError as exc:
            log.error("MIG rollback on %s: cannot destroy compute instance %d of GI %d: %s", uuid, ci_id, gi_id, exc)
    for gi_handle, gi_id in reversed(gis):
        try:
            nvml.destroy_gpu_instance(gi_handle)
            _notify(observer, MigStep("rollback-gi", uuid, gi_id))
        except NvmlError as exc:
            log.error("MIG rollback on %s: cannot destroy GPU instance %d: %s", uuid, gi_id, exc)


def reconcile(
    nvml: MigNvml,
    handle: DeviceHandle,
    uuid: str,
    plan: GroupPlan,
    catalog: ProfileCatalog,
    ci_profiles: CiProfileCache,
    *,
    busy: BusyProbe | None = None,
    observer: Observer | None = None,
    memo: ResultMemo | None = None,
) -> ApplyResult:
    """Apply ``plan`` to the GPU and return every position's MIG device (see the module doc).

    Raises ``MigInUseError`` (nothing of the plan destroyed; nothing at all when the process
    check saw the busy instance), ``MigApplyError`` (created instances rolled back) or
    ``MigResolveError``.
    """
    try:
        existing = read_existing(nvml, handle, catalog, ci_profiles)
    except NvmlError as exc:
        raise MigApplyError(uuid, exc) from None
    desired = plan.keys
    doomed = []
    kept = {}
    gi: ExistingGi | None
    for gi in existing:
        key = gi.key
        if key in desired:
            kept[key] = gi
        else:
            doomed.append(gi)
    reshaped = [gi for gi in kept.values() if gi.partial_cis]
    if doomed or reshaped:
        state = busy() if busy is not None else Busy(frozenset(), known=False)
        _check_idle(uuid, doomed + reshaped, state)
    destroyed = []
    for gi in doomed:
        _destroy_gi(nvml, uuid, gi, observer)
        destroyed.append(gi.id)
    for gi in reshaped:
        for ci in gi.partial_cis:
            _destroy_ci(nvml, uuid, gi, ci.handle, ci.id, observer)
            gi.cis.remove(ci)

    created_gis: list[tuple[GpuInstance, int]] = []
    created_cis: list[tuple[ComputeInstance, int, int]] = []
    created_positions = []
    ids: list[tuple[int, int]] = []
    try:
        for inst in plan.instances:
            gi = kept.get(inst.key)
            made = False
            if gi is None:
                gi_handle = nvml.create_gpu_instance(handle, inst.profile.profile_id, inst.placement)
                gi_id = nvml.gpu_instance_info(gi_handle).id
                created_gis.append((gi_handle, gi_id))
                _notify(observer, MigStep("create-gi", uuid, gi_id, position=inst.position))
                gi = read_gpu_instance(nvml, gi_handle, inst.profile, ci_profiles)
                kept[inst.key] = gi
                made = True
            full = gi.full_ci
            if full is None:
                ci_profile = ci_profiles.full(nvml, gi.handle, inst.profile)
                ci_handle = nvml.create_compute_instance(gi.handle, ci_profile.profile_id)
                ci_id = nvml.compute_instance_info(ci_handle).id
                created_cis.append((ci_handle, gi.id, ci_id))
                _notify(observer, MigStep("create-ci", uuid, gi.id, ci_id, position=inst.position))
                made = True
                ids.append((gi.id, ci_id))
            else:
                ids.append((gi.id, full.id))
            if made:
                created_positions.append(inst.position)
        uuids = mig_device_uuids(nvml, handle)
    except NvmlError as exc:
        _rollback(nvml, uuid, created_cis, created_gis, observer)
        raise MigApplyError(uuid, exc) from None
    except BaseException:
        _rollback(nvml, uuid, created_cis, created_gis, observer)
        raise
    devices = []
    for inst, (gi_id, ci_id) in zip(plan.instances, ids, strict=True):
        mig_uuid = uuids.get((gi_id, ci_id))
        if mig_uuid is None:
            raise MigResolveError(
                f"MIG position {inst.position} of group {plan.group} on {uuid}: no MIG device "
                f"for GPU instance {gi_id} / compute instance {ci_id}"
            )
        devices.append(_instance_info(memo, uuid, plan.group, inst, gi_id, ci_id, mig_uuid))
    found = tuple(devices)
    if memo is None or destroyed or created_positions:
        return ApplyResult(uuid, plan.group, found, tuple(destroyed), tuple(created_positions))
    memo_key = ("apply", uuid, plan.group)
    hit = memo.get(memo_key)
    if hit is not None and hit.devices == found:  # identical infos: the memo's objects
        return hit
    result = memo[memo_key] = ApplyResult(uuid, plan.group, found)
    return result


def resolve(
    nvml: MigNvml,
    handle: DeviceHandle,
    uuid: str,
    plan: GroupPlan,
    catalog: ProfileCatalog,
    ci_profiles: CiProfileCache,
    *,
    memo: ResultMemo | None = None,
) -> dict[int, MigInstanceInfo]:
    """Position → MIG device for the positions of ``plan`` that exist now (read-only, docs/mig.md §6).

    A position whose GPU instance or full compute instance is missing is absent from the result.
    """
    existing = {gi.key: gi for gi in read_existing(nvml, handle, catalog, ci_profiles)}
    uuids = mig_device_uuids(nvml, handle)
    out = {}
    for inst in plan.instances:
        gi = existing.get(inst.key)
        ci = gi.full_ci if gi is not None else None
        if gi is None or ci is None:
            continue
        mig_uuid = uuids.get((gi.id, ci.id))
        if mig_uuid is not None:
            out[inst.position] = _instance_info(memo, uuid, plan.group, inst, gi.id, ci.id, mig_uuid)
    return out
