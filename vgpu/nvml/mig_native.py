"""Thin typed wrappers over the NVML MIG calls of the native layer (mig.md §5–§6).

One method per NVML call; no policy.  Every failure raises ``NvmlError`` whose ``code`` is
the NVML return code (e.g. ``NVML_ERROR_IN_USE`` when destroying an instance that has
processes) and whose message is the library's ``nvmlErrorString``.  The plans and the
reconciliation live in ``vgpu.mig``.

Handles (``DeviceHandle``, ``GpuInstance``, ``ComputeInstance``) are only valid while the
``MigNvml`` that produced them is open; ``close()`` must not race with calls in flight.
Pass-through calls do not take the context lock, so calls on different GPUs can run in
parallel (the per-GPU serialisation of mig.md §5 belongs to the caller).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vgpu._native import ffi, lib
from vgpu.nvml.errors import NvmlError
from vgpu.nvml.native import NativeNvml

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12
NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
# GI slice count -> compute-instance profile constant of the full-GI CI (mig.md §3).
CI_PROFILE_FOR_SLICES = {1: 0x0, 2: 0x1, 3: 0x2, 4: 0x3, 7: 0x4, 8: 0x5, 6: 0x6}

_UUID_LEN = 96


@dataclass(frozen=True)
class DeviceHandle:
    """A physical or MIG ``nvmlDevice_t``."""

    ptr: Any


@dataclass(frozen=True)
class GpuInstance:
    """An ``nvmlGpuInstance_t``."""

    ptr: Any


@dataclass(frozen=True)
class ComputeInstance:
    """An ``nvmlComputeInstance_t``."""

    ptr: Any


@dataclass(frozen=True)
class Placement:
    """Memory-slice range ``[start, start + size)``."""

    start: int
    size: int


@dataclass(frozen=True)
class GpuInstanceProfile:
    id: int                     # the profileId every other GI call takes
    slice_count: int
    instance_count: int
    multiprocessor_count: int
    copy_engine_count: int
    decoder_count: int
    encoder_count: int
    jpeg_count: int
    ofa_count: int
    memory_size_mb: int
    is_p2p_supported: bool
    name: str | None            # e.g. "MIG 1g.10gb"; None when only the v1 call exists


@dataclass(frozen=True)
class GpuInstanceInfo:
    id: int
    profile_id: int
    placement: Placement
    device_index: int | None    # parent in this context's NVML index order


@dataclass(frozen=True)
class ComputeInstanceProfile:
    id: int
    slice_count: int
    instance_count: int
    multiprocessor_count: int
    shared_copy_engine_count: int
    shared_decoder_count: int
    shared_encoder_count: int
    shared_jpeg_count: int
    shared_ofa_count: int
    name: str | None


@dataclass(frozen=True)
class ComputeInstanceInfo:
    id: int
    profile_id: int
    placement: Placement
    device_index: int | None
    gpu_instance: GpuInstance


def _name(has: int, raw: Any) -> str | None:
    return ffi.string(raw).decode("utf-8", "replace") if has else None


def _index(value: int) -> int | None:
    return None if value < 0 else int(value)


class MigNvml:
    """MIG calls against ``library`` (None: ``VGPU_NVML_LIBRARY``, then the system's).

    Pass ``native`` to share an open context; otherwise this object opens (and closes) its own.
    """

    def __init__(self, library: str | None = None, *, native: NativeNvml | None = None) -> None:
        self._owns_native = native is None
        self.native = native if native is not None else NativeNvml(library)

    def close(self) -> None:
        if self._owns_native:
            self.native.close()

    def __enter__(self) -> "MigNvml":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def library(self) -> str:
        return self.native.library

    def _check(self, rc: int, function: str) -> None:
        if rc != 0:
            raise self.native.error(rc, function)

    # -- devices ---------------------------------------------------------------------------

    def device_count(self) -> int:
        return self.native.device_count()

    def refresh(self) -> int:
        """Re-enumerate physical devices (handles may change after a MIG mode change)."""
        return self.native.refresh()

    def device(self, index: int) -> DeviceHandle:
        out = ffi.new("vnv_device_t *")
        with self.native.lock:
            rc = lib.vnv_device_handle(self.native.ctx, index, out)
        self._check(rc, f"nvmlDeviceGetHandleByIndex({index})")
        return DeviceHandle(out[0])

    def device_by_uuid(self, uuid: str) -> DeviceHandle:
        out = ffi.new("vnv_device_t *")
        rc = lib.vnv_device_handle_by_uuid(self.native.ctx, uuid.encode(), out)
        self._check(rc, f"nvmlDeviceGetHandleByUUID({uuid})")
        return DeviceHandle(out[0])

    def uuid(self, device: DeviceHandle) -> str:
        """UUID of a physical (``GPU-…``) or MIG (``MIG-…``) device, passed through unchanged."""
        buf = ffi.new("char[]", _UUID_LEN)
        rc = lib.vnv_device_uuid(self.native.ctx, device.ptr, buf, _UUID_LEN)
        self._check(rc, "nvmlDeviceGetUUID")
        return ffi.string(buf).decode("utf-8", "replace")

    # -- MIG mode --------------------------------------------------------------------------

    def get_mig_mode(self, device: DeviceHandle) -> tuple[int, int]:
        """(current, pending); ``NOT_SUPPORTED`` means the GPU is not MIG-capable."""
        cur, pend = ffi.new("uint32_t *"), ffi.new("uint32_t *")
        rc = lib.vnv_get_mig_mode(self.native.ctx, device.ptr, cur, pend)
        self._check(rc, "nvmlDeviceGetMigMode")
        return int(cur[0]), int(pend[0])

    def set_mig_mode(self, device: DeviceHandle, mode: int) -> int:
        """Set MIG mode; returns the activation status (0 = active now; else e.g. RESET_REQUIRED)."""
        act = ffi.new("int32_t *")
        rc = lib.vnv_set_mig_mode(self.native.ctx, device.ptr, mode, act)
        self._check(rc, "nvmlDeviceSetMigMode")
        return int(act[0])

    # -- GPU instances ---------------------------------------------------------------------

    def gpu_instance_profile_info(self, device: DeviceHandle, profile: int) -> GpuInstanceProfile:
        """Profile info for a GI profile constant (the V variant, falling back to v1 without a name)."""
        o = ffi.new("vnv_gi_profile *")
        rc = lib.vnv_gi_profile_info(self.native.ctx, device.ptr, profile, o)
        self._check(rc, f"nvmlDeviceGetGpuInstanceProfileInfoV(profile {profile})")
        return GpuInstanceProfile(
            id=o.id, slice_count=o.slice_count, instance_count=o.instance_count,
            multiprocessor_count=o.multiprocessor_count, copy_engine_count=o.copy_engine_count,
            decoder_count=o.decoder_count, encoder_count=o.encoder_count, jpeg_count=o.jpeg_count,
            ofa_count=o.ofa_count, memory_size_mb=int(o.memory_size_mb),
            is_p2p_supported=bool(o.is_p2p_supported), name=_name(o.has_name, o.name))

    def gpu_instance_possible_placements(self, device: DeviceHandle, profile_id: int) -> list[Placement]:
        cap = lib.VNV_MAX_INSTANCES
        out, count = ffi.new("vnv_placement[]", cap), ffi.new("uint32_t *")
        rc = lib.vnv_gi_possible_placements(self.native.ctx, device.ptr, profile_id, out, cap, count)
        self._check(rc, f"nvmlDeviceGetGpuInstancePossiblePlacements_v2(profileId {profile_id})")
        return [Placement(out[k].start, out[k].size) for k in range(count[0])]

    def create_gpu_instance(self, device: DeviceHandle, profile_id: int,
                            placement: Placement | None = None) -> GpuInstance:
        """Create a GI, at ``placement`` when given (``…WithPlacement``), else where NVML chooses."""
        out = ffi.new("vnv_gpu_instance_t *")
        if placement is None:
            rc = lib.vnv_gi_create(self.native.ctx, device.ptr, profile_id, out)
            self._check(rc, f"nvmlDeviceCreateGpuInstance(profileId {profile_id})")
        else:
            rc = lib.vnv_gi_create_with_placement(self.native.ctx, device.ptr, profile_id,
                                                  placement.start, placement.size, out)
            self._check(rc, f"nvmlDeviceCreateGpuInstanceWithPlacement(profileId {profile_id}, "
                            f"start {placement.start}, size {placement.size})")
        return GpuInstance(out[0])

    def gpu_instances(self, device: DeviceHandle, profile_id: int) -> list[GpuInstance]:
        cap = lib.VNV_MAX_INSTANCES
        out, count = ffi.new("vnv_gpu_instance_t[]", cap), ffi.new("uint32_t *")
        rc = lib.vnv_gi_list(self.native.ctx, device.ptr, profile_id, out, cap, count)
        self._check(rc, f"nvmlDeviceGetGpuInstances(profileId {profile_id})")
        return [GpuInstance(out[k]) for k in range(count[0])]

    def gpu_instance_by_id(self, device: DeviceHandle, gi_id: int) -> GpuInstance:
        out = ffi.new("vnv_gpu_instance_t *")
        rc = lib.vnv_gi_by_id(self.native.ctx, device.ptr, gi_id, out)
        self._check(rc, f"nvmlDeviceGetGpuInstanceById({gi_id})")
        return GpuInstance(out[0])

    def gpu_instance_info(self, gi: GpuInstance) -> GpuInstanceInfo:
        o = ffi.new("vnv_gi_info *")
        with self.native.lock:  # reads the device table to name the parent
            rc = lib.vnv_gi_get_info(self.native.ctx, gi.ptr, o)
        self._check(rc, "nvmlGpuInstanceGetInfo")
        return GpuInstanceInfo(o.id, o.profile_id, Placement(o.placement_start, o.placement_size),
                               _index(o.device_index))

    def destroy_gpu_instance(self, gi: GpuInstance) -> None:
        """``NVML_ERROR_IN_USE`` when it still has compute instances or processes."""
        self._check(lib.vnv_gi_destroy(self.native.ctx, gi.ptr), "nvmlGpuInstanceDestroy")

    # -- compute instances -----------------------------------------------------------------

    def compute_instance_profile_info(self, gi: GpuInstance, profile: int,
                                      eng_profile: int = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                      ) -> ComputeInstanceProfile:
        o = ffi.new("vnv_ci_profile *")
        rc = lib.vnv_ci_profile_info(self.native.ctx, gi.ptr, profile, eng_profile, o)
        self._check(rc, f"nvmlGpuInstanceGetComputeInstanceProfileInfoV(profile {profile})")
        return ComputeInstanceProfile(
            id=o.id, slice_count=o.slice_count, instance_count=o.instance_count,
            multiprocessor_count=o.multiprocessor_count,
            shared_copy_engine_count=o.shared_copy_engine_count,
            shared_decoder_count=o.shared_decoder_count, shared_encoder_count=o.shared_encoder_count,
            shared_jpeg_count=o.shared_jpeg_count, shared_ofa_count=o.shared_ofa_count,
            name=_name(o.has_name, o.name))

    def create_compute_instance(self, gi: GpuInstance, profile_id: int) -> ComputeInstance:
        out = ffi.new("vnv_compute_instance_t *")
        rc = lib.vnv_ci_create(self.native.ctx, gi.ptr, profile_id, out)
        self._check(rc, f"nvmlGpuInstanceCreateComputeInstance(profileId {profile_id})")
        return ComputeInstance(out[0])

    def compute_instances(self, gi: GpuInstance, profile_id: int) -> list[ComputeInstance]:
        cap = lib.VNV_MAX_INSTANCES
        out, count = ffi.new("vnv_compute_instance_t[]", cap), ffi.new("uint32_t *")
        rc = lib.vnv_ci_list(self.native.ctx, gi.ptr, profile_id, out, cap, count)
        self._check(rc, f"nvmlGpuInstanceGetComputeInstances(profileId {profile_id})")
        return [ComputeInstance(out[k]) for k in range(count[0])]

    def compute_instance_info(self, ci: ComputeInstance) -> ComputeInstanceInfo:
        o = ffi.new("vnv_ci_info *")
        with self.native.lock:
            rc = lib.vnv_ci_get_info(self.native.ctx, ci.ptr, o)
        self._check(rc, "nvmlComputeInstanceGetInfo_v2")
        return ComputeInstanceInfo(o.id, o.profile_id, Placement(o.placement_start, o.placement_size),
                                   _index(o.device_index), GpuInstance(o.gpu_instance))

    def destroy_compute_instance(self, ci: ComputeInstance) -> None:
        """``NVML_ERROR_IN_USE`` when processes run on it."""
        self._check(lib.vnv_ci_destroy(self.native.ctx, ci.ptr), "nvmlComputeInstanceDestroy")

    # -- MIG devices -----------------------------------------------------------------------

    def max_mig_device_count(self, device: DeviceHandle) -> int:
        count = ffi.new("uint32_t *")
        self._check(lib.vnv_max_mig_device_count(self.native.ctx, device.ptr, count),
                    "nvmlDeviceGetMaxMigDeviceCount")
        return int(count[0])

    def mig_device_by_index(self, device: DeviceHandle, index: int) -> DeviceHandle:
        """``NVML_ERROR_NOT_FOUND`` for an index without a MIG device (mig.md §6 skips those)."""
        out = ffi.new("vnv_device_t *")
        rc = lib.vnv_mig_device_by_index(self.native.ctx, device.ptr, index, out)
        self._check(rc, f"nvmlDeviceGetMigDeviceHandleByIndex({index})")
        return DeviceHandle(out[0])

    def is_mig_device(self, device: DeviceHandle) -> bool:
        out = ffi.new("uint32_t *")
        self._check(lib.vnv_is_mig_device(self.native.ctx, device.ptr, out), "nvmlDeviceIsMigDeviceHandle")
        return bool(out[0])

    def mig_gpu_instance_id(self, mig: DeviceHandle) -> int:
        out = ffi.new("uint32_t *")
        self._check(lib.vnv_mig_gpu_instance_id(self.native.ctx, mig.ptr, out), "nvmlDeviceGetGpuInstanceId")
        return int(out[0])

    def mig_compute_instance_id(self, mig: DeviceHandle) -> int:
        out = ffi.new("uint32_t *")
        self._check(lib.vnv_mig_compute_instance_id(self.native.ctx, mig.ptr, out),
                    "nvmlDeviceGetComputeInstanceId")
        return int(out[0])

    def parent_device(self, mig: DeviceHandle) -> DeviceHandle:
        out = ffi.new("vnv_device_t *")
        self._check(lib.vnv_parent_of_mig_device(self.native.ctx, mig.ptr, out),
                    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
        return DeviceHandle(out[0])


__all__ = [
    "CI_PROFILE_FOR_SLICES", "ComputeInstance", "ComputeInstanceInfo", "ComputeInstanceProfile",
    "DeviceHandle", "GpuInstance", "GpuInstanceInfo", "GpuInstanceProfile", "MigNvml",
    "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED", "NVML_DEVICE_MIG_DISABLE", "NVML_DEVICE_MIG_ENABLE",
    "NVML_GPU_INSTANCE_PROFILE_COUNT", "NvmlError", "Placement",
]
