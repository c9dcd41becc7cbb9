"""What is on a MIG-enabled GPU right now: GPU instances, their compute instances, MIG devices.

Read-only NVML queries (mig.md §5.2 step 3 and §6).  Nothing here creates or destroys; the
reconciliation in :mod:`vgpu.mig.reconcile` compares this against a plan.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from vgpu.mig.profiles import ProfileCatalog, ProfileInfo
from vgpu.nvml.errors import NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NvmlError
from vgpu.nvml.mig_native import ComputeInstance, DeviceHandle, GpuInstance, MigNvml, Placement

NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x9


@dataclass(frozen=True)
class CiProfile:
    """A compute-instance profile offered inside GIs of one GI profile."""

    constant: int
    profile_id: int
    full: bool              # spans the whole GI (the only kind we create)


@dataclass
class ExistingCi:
    handle: ComputeInstance
    id: int
    profile_id: int
    full: bool


@dataclass
class ExistingGi:
    handle: GpuInstance
    id: int
    profile_id: int
    placement: Placement
    profile: ProfileInfo
    cis: list[ExistingCi] = field(default_factory=list)

    @property
    def key(self) -> tuple[int, int]:
        """(profileId, start), the identity a plan position refers to (mig.md §6 step 1)."""
        return (self.profile_id, self.placement.start)

    @property
    def full_ci(self) -> ExistingCi | None:
        return next((c for c in self.cis if c.full), None)

    @property
    def partial_cis(self) -> list[ExistingCi]:
        return [c for c in self.cis if not c.full]


class CiProfileCache:
    """CI profile ids per GI profile: immutable while MIG mode is on, so asked once (mig.md §7)."""

    def __init__(self) -> None:
        self._by_gi_profile: dict[int, tuple[CiProfile, ...]] = {}

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
                if exc.code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            found.append(CiProfile(constant, info.id, constant == full_constant))
        if not any(p.full for p in found):
            # The full-GI CI profile must exist (mig.md §3); ask for it so its error surfaces.
            info = nvml.compute_instance_profile_info(gi, full_constant)
            found.append(CiProfile(full_constant, info.id, True))
        result = tuple(found)
        self._by_gi_profile[profile.profile_id] = result
        return result

    def full(self, nvml: MigNvml, gi: GpuInstance, profile: ProfileInfo) -> CiProfile:
        return next(p for p in self.get(nvml, gi, profile) if p.full)


def read_gpu_instance(nvml: MigNvml, gi: GpuInstance, profile: ProfileInfo, ci_profiles: CiProfileCache) -> ExistingGi:
    info = nvml.gpu_instance_info(gi)
    out = ExistingGi(gi, info.id, info.profile_id, info.placement, profile)
    for cp in ci_profiles.get(nvml, gi, profile):
        for ci in nvml.compute_instances(gi, cp.profile_id):
            out.cis.append(ExistingCi(ci, nvml.compute_instance_info(ci).id, cp.profile_id, cp.full))
    out.cis.sort(key=lambda c: c.id)
    return out


def read_layout(nvml: MigNvml, handle: DeviceHandle, catalog: ProfileCatalog,
                ci_profiles: CiProfileCache) -> list[ExistingGi]:
    """Every GPU instance of every supported profile with its compute instances, by GI id."""
    out = []
    for profile in catalog.profiles:
        for gi in nvml.gpu_instances(handle, profile.profile_id):
            out.append(read_gpu_instance(nvml, gi, profile, ci_profiles))
    out.sort(key=lambda g: g.id)
    return out


def mig_device_uuids(nvml: MigNvml, handle: DeviceHandle) -> dict[tuple[int, int], str]:
    """(giId, ciId) → MIG device UUID, scanning every MIG device index (mig.md §6 steps 3–4).

    Indices without a device answer ``NOT_FOUND`` and are skipped: MIG index order is not
    position order, so nothing here assumes it (known-failures G-4).  The UUID is passed
    through unchanged (``MIG-<uuid>`` or the pre-R470 ``MIG-GPU-<uuid>/<gi>/<ci>``).
    """
    out: dict[tuple[int, int], str] = {}
    for index in range(nvml.max_mig_device_count(handle)):
        try:
            mig = nvml.mig_device_by_index(handle, index)
        except NvmlError as exc:
            if exc.code == NVML_ERROR_NOT_FOUND:
                continue
            raise
        out[(nvml.mig_gpu_instance_id(mig), nvml.mig_compute_instance_id(mig))] = nvml.uuid(mig)
    return out
