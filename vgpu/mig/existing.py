"""What exists on a MIG-enabled GPU right now: GPU instances, their compute instances, MIG devices.

Read-only NVML queries (docs/mig.md §5.2 step 3 and §6).  Nothing here creates or destroys; the
reconciliation in :mod:`vgpu.mig.reconcile` compares this against a plan (the configured
geometry placed on the GPU, :mod:`vgpu.mig.plan`).

The existing instances and the MIG devices are read with the bulk calls of ``MigNvml`` (the
loop over profiles, GIs and CIs runs in C; same NVML calls, same order).  The C query names, per GI
profile, its CI profile ids from :class:`CiProfileCache`; a GI profile whose CI profiles are
not known yet (no GI of it was seen) has its GIs' CIs read call by call, which also fills the
cache, after which the next read is a single bulk call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vgpu.mig.profiles import SKIPPED_PROFILE_CODES, ProfileCatalog, ProfileInfo
from vgpu.nvml.errors import NvmlError
from vgpu.nvml.mig_calls import (
    NVML_COMPUTE_INSTANCE_PROFILE_COUNT,
    ComputeInstance,
    DeviceHandle,
    GpuInstance,
    InstanceQuery,
    MigNvml,
    Placement,
    instance_query,
)


@dataclass(frozen=True)
class CiProfile:
    """A compute-instance profile offered inside GIs of one GI profile."""

    constant: int
    profile_id: int
    full: bool  # spans the whole GI (the only kind we create)


@dataclass(slots=True)
class ExistingCi:
    handle: ComputeInstance
    id: int
    profile_id: int
    full: bool


@dataclass(slots=True)
class ExistingGi:
    handle: GpuInstance
    id: int
    profile_id: int
    placement: Placement
    profile: ProfileInfo
    cis: list[ExistingCi] = field(default_factory=list)

    @property
    def key(self) -> tuple[int, int]:
        """(profileId, start), the identity a plan position refers to (docs/mig.md §6 step 1)."""
        return (self.profile_id, self.placement.start)

    @property
    def full_ci(self) -> ExistingCi | None:
        for c in self.cis:
            if c.full:
                return c
        return None

    @property
    def partial_cis(self) -> list[ExistingCi]:
        return [c for c in self.cis if not c.full] if self.cis else []


class CiProfileCache:
    """CI profile ids per GI profile: immutable while MIG mode is on, so asked once (docs/mig.md §7)."""

    def __init__(self) -> None:
        self._by_gi_profile: dict[int, tuple[CiProfile, ...]] = {}
        self._query: tuple[Any, int, InstanceQuery] | None = None  # (catalog, profiles known, query)

    def known(self, profile: ProfileInfo) -> tuple[CiProfile, ...] | None:
        """The cached CI profiles of a GI profile, or None when none of its GIs was seen yet."""
        return self._by_gi_profile.get(profile.profile_id)

    def query(self, catalog: ProfileCatalog) -> InstanceQuery:
        """The bulk instance query for ``catalog``, rebuilt only when it or the cache changed."""
        cached = self._query
        if cached is not None and cached[0] is catalog and cached[1] == len(self._by_gi_profile):
            return cached[2]
        entries = []
        for profile in catalog.profiles:
            cps = self._by_gi_profile.get(profile.profile_id)
            entries.append((profile.profile_id, None if cps is None else [cp.profile_id for cp in cps]))
        query = instance_query(entries)
        self._query = (catalog, len(self._by_gi_profile), query)
        return query

    def get(self, nvml: MigNvml, gi: GpuInstance, profile: ProfileInfo) -> tuple[CiProfile, ...]:
        cached = self._by_gi_profile.get(profile.profile_id)
        if cached is not None:
            return cached
        full_constant = profile.ci_constant
        found = []
        for constant in range(NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            try:
                info = nvml.compute_instance_profile_info(gi, constant)
            except NvmlError as exc:
                if exc.code in SKIPPED_PROFILE_CODES:
                    continue
                raise
            found.append(CiProfile(constant, info.id, constant == full_constant))
        if not any(p.full for p in found):
            # The full-GI CI profile must exist (docs/mig.md §3); ask for it so its error surfaces.
            info = nvml.compute_instance_profile_info(gi, full_constant)
            found.append(CiProfile(full_constant, info.id, True))
        result = tuple(found)
        self._by_gi_profile[profile.profile_id] = result
        return result

    def full(self, nvml: MigNvml, gi: GpuInstance, profile: ProfileInfo) -> CiProfile:
        return next(p for p in self.get(nvml, gi, profile) if p.full)


def _read_cis(nvml: MigNvml, gi: ExistingGi, ci_profiles: CiProfileCache) -> None:
    """Append ``gi``'s compute instances, read call by call (learns its CI profiles first)."""
    for cp in ci_profiles.get(nvml, gi.handle, gi.profile):
        for ci in nvml.compute_instances(gi.handle, cp.profile_id):
            gi.cis.append(ExistingCi(ci, nvml.compute_instance_info(ci).id, cp.profile_id, cp.full))


def read_gpu_instance(nvml: MigNvml, gi: GpuInstance, profile: ProfileInfo, ci_profiles: CiProfileCache) -> ExistingGi:
    info = nvml.gpu_instance_info(gi)
    out = ExistingGi(gi, info.id, info.profile_id, info.placement, profile)
    _read_cis(nvml, out, ci_profiles)
    out.cis.sort(key=_by_id)
    return out


def read_existing(
    nvml: MigNvml, handle: DeviceHandle, catalog: ProfileCatalog, ci_profiles: CiProfileCache
) -> list[ExistingGi]:
    """Every GPU instance of every supported profile with its compute instances, by GI id."""
    out = []
    profiles = catalog.profiles
    for row in nvml.read_instances(handle, ci_profiles.query(catalog)):
        profile = profiles[row.query]
        gi = ExistingGi(row.handle, row.id, row.profile_id, row.placement, profile)
        cps = ci_profiles.known(profile) if row.cis is not None else None
        if cps is None or row.cis is None:  # CI profiles learnt from this GI; its CIs read call by call
            _read_cis(nvml, gi, ci_profiles)
        else:
            for ci_handle, ci_id, k in row.cis:
                cp = cps[k]
                gi.cis.append(ExistingCi(ci_handle, ci_id, cp.profile_id, cp.full))
        if len(gi.cis) > 1:
            gi.cis.sort(key=_by_id)
        out.append(gi)
    out.sort(key=_by_id)
    return out


def _by_id(item: ExistingGi | ExistingCi) -> int:
    return item.id


def mig_device_uuids(nvml: MigNvml, handle: DeviceHandle) -> dict[tuple[int, int], str]:
    """(giId, ciId) → MIG device UUID, scanning every MIG device index (docs/mig.md §6 steps 3–4).

    Indices without a device answer ``NOT_FOUND`` and are skipped: MIG index order is not
    position order, so nothing here assumes it (docs/failures.md G-4).  The UUID is passed
    through unchanged (``MIG-<uuid>`` or the pre-R470 ``MIG-GPU-<uuid>/<gi>/<ci>``).
    """
    return {(row.gpu_instance_id, row.compute_instance_id): row.uuid for row in nvml.mig_devices(handle)}
