"""GPU-instance profiles of one GPU, resolved by name (docs/mig.md §3).

``knownMigGeometries`` names instance types (``2g.20gb``); NVML's calls take a ``profileId``.
The bridge is ``nvmlDeviceGetGpuInstanceProfileInfoV``: enumerate the GI profile constants
0 … ``NVML_GPU_INSTANCE_PROFILE_COUNT``−1, skip ``NOT_SUPPORTED`` / ``INVALID_ARGUMENT``, and
match the returned name (a leading ``MIG `` stripped, case-insensitively).  Libraries older
than the V call return no name; then the static per-model tables below say which constant a
name is, and the v1 call still supplies the ``profileId`` and sizes.

Profile info is immutable while MIG mode is enabled (docs/mig.md §7), so a catalog is resolved
once per GPU and cached by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.mig.errors import MigConfigError
from vgpu.nvml.errors import (
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_SUPPORTED,
    NvmlError,
)
from vgpu.nvml.mig_calls import (
    CI_PROFILE_FOR_SLICES,
    NVML_GPU_INSTANCE_PROFILE_COUNT,
    DeviceHandle,
    MigNvml,
    Placement,
)

# GI profile constants (nvml.h NVML_GPU_INSTANCE_PROFILE_*).
GI_1_SLICE, GI_2_SLICE, GI_3_SLICE, GI_4_SLICE, GI_7_SLICE = 0x0, 0x1, 0x2, 0x3, 0x4
GI_1_SLICE_REV1, GI_2_SLICE_REV1, GI_1_SLICE_REV2 = 0x7, 0x8, 0x9


@dataclass(frozen=True)
class ProfileInfo:
    """One GPU-instance profile of one GPU, as the apply and the plan need it."""

    name: str  # "2g.20gb" (NVML's name without "MIG ")
    constant: int  # NVML_GPU_INSTANCE_PROFILE_* passed to the profile-info call
    profile_id: int  # info.id: what every other GI call takes
    slice_count: int  # compute slices
    instance_count: int  # max instances of this profile on the GPU
    memory_size_mb: int
    placements: tuple[Placement, ...]
    source: str = "nvml"  # "nvml" (V call) or "static" (fallback table + v1 call)

    @property
    def ci_constant(self) -> int:
        """The compute-instance profile constant of the full-GI CI (docs/mig.md §3)."""
        try:
            return CI_PROFILE_FOR_SLICES[self.slice_count]
        except KeyError:
            raise MigConfigError(
                f"MIG profile {self.name}: no compute-instance profile for {self.slice_count} slices"
            ) from None


@dataclass(frozen=True)
class ProfileCatalog:
    """Every GI profile a GPU supports, by name and by ``profileId``."""

    profiles: tuple[ProfileInfo, ...]

    def by_name(self, name: str) -> ProfileInfo | None:
        want = normalize_name(name)
        return next((p for p in self.profiles if normalize_name(p.name) == want), None)

    def by_id(self, profile_id: int) -> ProfileInfo | None:
        return next((p for p in self.profiles if p.profile_id == profile_id), None)

    @property
    def full_slices(self) -> int:
        """Compute slices of the whole GPU: the largest profile's slice count (7 or 4)."""
        return max((p.slice_count for p in self.profiles), default=0)


def display_name(name: str) -> str:
    """NVML's profile name without the leading ``MIG `` (``MIG 1g.10gb`` → ``1g.10gb``)."""
    text = name.strip()
    return text[4:].strip() if text[:4].lower() == "mig " else text


def normalize_name(name: str) -> str:
    """The comparison key of a profile name: ``MIG `` stripped, lower case (docs/mig.md §3)."""
    return display_name(name).lower()


# --------------------------------------------------------------------------- static tables


@dataclass(frozen=True)
class StaticProfile:
    name: str
    constant: int
    instances: int
    placements: tuple[Placement, ...]
    memory_mib: int


def _p(starts: tuple[int, ...], size: int) -> tuple[Placement, ...]:
    return tuple(Placement(s, size) for s in starts)


_P7 = (0, 1, 2, 3, 4, 5, 6)


def _a100_class(
    n1: str, m1: int, n1r2: str, m1r2: int, n2: str, m2: int, n3: str, m3: int, n4: str, m4: int, n7: str, m7: int
) -> tuple[StaticProfile, ...]:
    """A100-40GB, A100-80GB, H100-80GB, H200, H20, B200 and GB200: same constants, counts and placements."""
    return (
        StaticProfile(n1, GI_1_SLICE, 7, _p(_P7, 1), m1),
        StaticProfile(f"{n1}+me", GI_1_SLICE_REV1, 1, _p(_P7, 1), m1),
        StaticProfile(n1r2, GI_1_SLICE_REV2, 4, _p((0, 2, 4, 6), 2), m1r2),
        StaticProfile(n2, GI_2_SLICE, 3, _p((0, 2, 4), 2), m2),
        StaticProfile(n3, GI_3_SLICE, 2, _p((0, 4), 4), m3),
        StaticProfile(n4, GI_4_SLICE, 1, _p((0,), 4), m4),
        StaticProfile(n7, GI_7_SLICE, 1, _p((0,), 8), m7),
    )


STATIC_TABLES: dict[str, tuple[StaticProfile, ...]] = {
    "A100-40GB": _a100_class(
        "1g.5gb", 4864, "1g.10gb", 9856, "2g.10gb", 9856, "3g.20gb", 19968, "4g.20gb", 19968, "7g.40gb", 40192
    ),
    "A100-80GB": _a100_class(
        "1g.10gb", 9728, "1g.20gb", 19968, "2g.20gb", 19968, "3g.40gb", 40192, "4g.40gb", 40192, "7g.80gb", 80896
    ),
    "H100-80GB": _a100_class(
        "1g.10gb", 9984, "1g.20gb", 20096, "2g.20gb", 20096, "3g.40gb", 40448, "4g.40gb", 40448, "7g.80gb", 81152
    ),
    "H200-141GB": _a100_class(
        "1g.18gb", 18432, "1g.35gb", 35840, "2g.35gb", 35840, "3g.71gb", 72704, "4g.71gb", 72704, "7g.141gb", 144384
    ),
    "H20-96GB": _a100_class(
        "1g.12gb", 12032, "1g.24gb", 24064, "2g.24gb", 24064, "3g.48gb", 48128, "4g.48gb", 48128, "7g.96gb", 96256
    ),
    "B200-180GB": _a100_class(
        "1g.23gb", 22784, "1g.45gb", 45568, "2g.45gb", 45568, "3g.90gb", 91136, "4g.90gb", 91136, "7g.180gb", 182272
    ),
    "GB200-186GB": _a100_class(
        "1g.23gb", 23552, "1g.47gb", 47104, "2g.47gb", 47104, "3g.93gb", 94208, "4g.93gb", 94208, "7g.186gb", 188416
    ),
    "A30-24GB": (
        StaticProfile("1g.6gb", GI_1_SLICE, 4, _p((0, 1, 2, 3), 1), 5836),
        StaticProfile("1g.6gb+me", GI_1_SLICE_REV1, 1, _p((0, 1, 2, 3), 1), 5836),
        StaticProfile("2g.12gb", GI_2_SLICE, 2, _p((0, 2), 2), 11672),
        StaticProfile("2g.12gb+me", GI_2_SLICE_REV1, 1, _p((0, 2), 2), 11672),
        StaticProfile("4g.24gb", GI_4_SLICE, 1, _p((0,), 4), 23344),
    ),
}


def static_model(gpu_name: str) -> str | None:
    """Which static table describes a GPU of this NVML name (None: none does)."""
    if "H200" in gpu_name:
        return "H200-141GB"
    if "GB200" in gpu_name:
        return "GB200-186GB"
    if "B200" in gpu_name:
        return "B200-180GB"
    at = gpu_name.find("H20")
    if at >= 0 and not gpu_name[at + 3 : at + 4].isdigit() and "141GB" not in gpu_name:
        return "H20-96GB"
    if "H100" in gpu_name and "80GB" in gpu_name:
        return "H100-80GB"
    if "A100" in gpu_name and "80GB" in gpu_name:
        return "A100-80GB"
    if "A100" in gpu_name and "40GB" in gpu_name:
        return "A100-40GB"
    at = gpu_name.find("A30")
    if at >= 0 and not gpu_name[at + 3 : at + 4].isdigit():  # "A3000" is not an A30
        return "A30-24GB"
    return None


# --------------------------------------------------------------------------- resolution

# Answers of a profile-info call for a profile constant this GPU (or GI) does not offer: skipped.
SKIPPED_PROFILE_CODES = (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT)


def _placements(
    nvml: MigNvml, handle: DeviceHandle, profile_id: int, fallback: tuple[Placement, ...] = ()
) -> tuple[Placement, ...]:
    try:
        found = nvml.gpu_instance_possible_placements(handle, profile_id)
    except NvmlError as exc:
        if exc.code == NVML_ERROR_FUNCTION_NOT_FOUND and fallback:
            return fallback
        raise
    return tuple(sorted(found, key=lambda p: (p.start, p.size)))


def resolve_catalog(nvml: MigNvml, handle: DeviceHandle, gpu_name: str) -> ProfileCatalog:
    """All GI profiles of a MIG-enabled GPU (docs/mig.md §3, "Finding a profile by name").

    Raises ``NvmlError`` for an NVML failure other than the skipped codes, and
    ``MigConfigError`` when the library has no V call and no static table fits the model.
    """
    found: list[ProfileInfo] = []
    for constant in range(NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = nvml.gpu_instance_profile_info(handle, constant)
        except NvmlError as exc:
            if exc.code in SKIPPED_PROFILE_CODES:
                continue
            raise
        if info.name is None:  # the library lacks the V call: names come from the static table
            return _static_catalog(nvml, handle, gpu_name)
        name = normalize_name(info.name)
        if any(normalize_name(p.name) == name for p in found):
            continue
        found.append(
            ProfileInfo(
                name=display_name(info.name),
                constant=constant,
                profile_id=info.id,
                slice_count=info.slice_count,
                instance_count=info.instance_count,
                memory_size_mb=info.memory_size_mb,
                placements=_placements(nvml, handle, info.id),
            )
        )
    return ProfileCatalog(tuple(found))


def _static_catalog(nvml: MigNvml, handle: DeviceHandle, gpu_name: str) -> ProfileCatalog:
    model = static_model(gpu_name)
    if model is None:
        raise MigConfigError(
            f"GPU {gpu_name!r}: the NVML library has no nvmlDeviceGetGpuInstanceProfileInfoV "
            "(profile names unknown) and there is no built-in MIG profile table for this model"
        )
    found = []
    for sp in STATIC_TABLES[model]:
        try:
            info = nvml.gpu_instance_profile_info(handle, sp.constant)
        except NvmlError as exc:
            if exc.code in SKIPPED_PROFILE_CODES:
                continue
            raise
        found.append(
            ProfileInfo(
                name=sp.name,
                constant=sp.constant,
                profile_id=info.id,
                slice_count=info.slice_count,
                instance_count=info.instance_count,
                memory_size_mb=info.memory_size_mb or sp.memory_mib,
                placements=_placements(nvml, handle, info.id, sp.placements),
                source="static",
            )
        )
    return ProfileCatalog(tuple(found))
