"""Thin typed wrappers over the NVML MIG calls of the native layer (native/nvml_mig.c; docs/mig.md §5–§6).

One method per NVML call; no policy.  Every failure raises ``NvmlError`` whose ``code`` is
the NVML return code (e.g. ``NVML_ERROR_IN_USE`` when destroying an instance that has
processes) and whose message is the library's ``nvmlErrorString``.  The plans and the
reconciliation live in ``vgpu.mig``.

Handles (``DeviceHandle``, ``GpuInstance``, ``ComputeInstance``) are only valid while the
``MigNvml`` that produced them is open; ``close()`` must not race with calls in flight.
Pass-through calls do not take the context lock, so calls on different GPUs can run in
parallel (the per-GPU serialisation of docs/mig.md §5 belongs to the caller).

Two bulk reads, :meth:`MigNvml.read_instances` and :meth:`MigNvml.mig_devices`, make the same NVML
calls in the same order as the per-call wrappers but loop in C (``vnv_mig_read_instances`` /
``vnv_mig_devices``) into per-thread scratch buffers: the steady-state apply/resolve is ~60
NVML calls, and one Python→C crossing per call (plus a result object each) cost more than the
calls themselves.  Per-thread, because one ``MigNvml`` serves every GPU and the caller only
serialises per GPU.  Handle wrappers and placements of the bulk reads are interned (value
objects: an equal one is reused instead of built again).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from vgpu._native import ffi, lib
from vgpu.nvml.context import NvmlContext
from vgpu.nvml.errors import NvmlError

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12
NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x9
NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
# GI slice count -> compute-instance profile constant of the full-GI CI (docs/mig.md §3).
CI_PROFILE_FOR_SLICES = {1: 0x0, 2: 0x1, 3: 0x2, 4: 0x3, 7: 0x4, 8: 0x5, 6: 0x6}

_UUID_LEN = lib.VNV_UUID_LEN
_BULK_CAP = 64  # GIs / CIs / MIG devices one bulk read returns (a GPU has at most 8 of each)
_INTERN_MAX = 4096  # interned handles/placements kept before the tables are cleared


def _row_words(struct: str, first_word: str, pointer: str | None) -> tuple[int, int, int]:
    """(uint32 words per row, word index of ``first_word``, pointer words per row) of a row type."""
    size = ffi.sizeof(struct)
    ptr = ffi.sizeof("uintptr_t")
    if size % 4 or (pointer is not None and (size % ptr or ffi.offsetof(struct, pointer) != 0)):
        raise ImportError(f"unexpected size or alignment of {struct}")
    return size // 4, ffi.offsetof(struct, first_word) // 4, size // ptr


_GI_WORDS, _GI_HEAD, _GI_PTRS = _row_words("vnv_gi_row", "query", "handle")
_CI_WORDS, _CI_HEAD, _CI_PTRS = _row_words("vnv_ci_row", "id", "handle")
if [
    ffi.offsetof("vnv_gi_row", f) // 4 - _GI_HEAD
    for f in ("query", "id", "profile_id", "placement_start", "placement_size", "ci_first", "ci_count", "cis_read")
] != list(range(8)) or ffi.offsetof("vnv_ci_row", "ci_profile") // 4 != _CI_HEAD + 1:
    raise ImportError("unexpected field order in vnv_gi_row / vnv_ci_row")
_MIG_ROW = ffi.sizeof("vnv_mig_device_row")
_MIG_WORDS = _MIG_ROW // 4
_MIG_UUID_AT = ffi.offsetof("vnv_mig_device_row", "uuid")
if _MIG_ROW % 4 or _MIG_UUID_AT != 12 or ffi.offsetof("vnv_mig_device_row", "compute_instance_id") != 8:
    raise ImportError("unexpected field offsets in vnv_mig_device_row")


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
    id: int  # the profileId every other GI call takes
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
    name: str | None  # e.g. "MIG 1g.10gb"; None when only the v1 call exists


@dataclass(frozen=True)
class GpuInstanceInfo:
    id: int
    profile_id: int
    placement: Placement
    device_index: int | None  # parent in this context's NVML index order


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


class InstanceQuery(NamedTuple):
    """The GI profiles an instance read lists, with the CI profile ids to list in each of their GIs
    (``None``: unknown yet, the GIs are listed without their CIs).  Built once, reused."""

    cdata: Any
    n_entries: int


def instance_query(entries: Sequence[tuple[int, Sequence[int] | None]]) -> InstanceQuery:
    """``[(gi_profile_id, ci_profile_ids or None), ...]`` as the C array the bulk read takes."""
    q = ffi.new("vnv_instance_query[]", max(1, len(entries)))
    for k, (gi_pid, ci_pids) in enumerate(entries):
        q[k].gi_profile_id = gi_pid
        if ci_pids is None or len(ci_pids) > lib.VNV_MAX_CI_PROFILES:
            q[k].n_ci_profiles = lib.VNV_CI_PROFILES_UNKNOWN
        else:
            q[k].n_ci_profiles = len(ci_pids)
            for j, pid in enumerate(ci_pids):
                q[k].ci_profile_ids[j] = pid
    return InstanceQuery(q, len(entries))


class GiRow(NamedTuple):
    """One GPU instance of a bulk instance read (internal row type of ``vgpu.mig.existing``)."""

    handle: GpuInstance
    query: int  # index of the InstanceQuery entry it was listed under
    id: int
    profile_id: int
    placement: Placement
    cis: list[tuple[ComputeInstance, int, int]] | None  # (handle, id, CI-profile index); None: not read


class MigDeviceRow(NamedTuple):
    mig_index: int  # the index of nvmlDeviceGetMigDeviceHandleByIndex
    gpu_instance_id: int
    compute_instance_id: int
    uuid: str


# NamedTuple rows built without the Python-level __new__ (all fields are always given).
_new_tuple = tuple.__new__


class _Scratch(threading.local):
    """Output buffers of the bulk reads, one set per thread (see the module docstring)."""

    def __init__(self) -> None:
        self.gis = ffi.new("vnv_gi_row[]", _BULK_CAP)
        self.cis = ffi.new("vnv_ci_row[]", _BULK_CAP)
        self.migs = ffi.new("vnv_mig_device_row[]", _BULK_CAP)
        self.status = ffi.new("vnv_mig_status *")
        # Integer views of the same memory, for ffi.unpack (see MigNvml.read_instances).
        self.gi_words = ffi.cast("uint32_t *", self.gis)
        self.gi_ptrs = ffi.cast("uintptr_t *", self.gis)
        self.ci_words = ffi.cast("uint32_t *", self.cis)
        self.ci_ptrs = ffi.cast("uintptr_t *", self.cis)
        self.mig_words = ffi.cast("uint32_t *", self.migs)


def _bulk_function(call: int, arg: int) -> str:
    """The NVML function a failed bulk read names: the per-call wrappers' wording."""
    return {
        lib.VNV_CALL_GI_LIST: f"nvmlDeviceGetGpuInstances(profileId {arg})",
        lib.VNV_CALL_GI_INFO: "nvmlGpuInstanceGetInfo",
        lib.VNV_CALL_CI_LIST: f"nvmlGpuInstanceGetComputeInstances(profileId {arg})",
        lib.VNV_CALL_CI_INFO: "nvmlComputeInstanceGetInfo_v2",
        lib.VNV_CALL_MAX_MIG: "nvmlDeviceGetMaxMigDeviceCount",
        lib.VNV_CALL_MIG_BY_INDEX: f"nvmlDeviceGetMigDeviceHandleByIndex({arg})",
        lib.VNV_CALL_MIG_GI_ID: "nvmlDeviceGetGpuInstanceId",
        lib.VNV_CALL_MIG_CI_ID: "nvmlDeviceGetComputeInstanceId",
        lib.VNV_CALL_UUID: "nvmlDeviceGetUUID",
    }.get(call, "MIG bulk read")


def _name(has: int, raw: Any) -> str | None:
    return ffi.string(raw).decode("utf-8", "replace") if has else None


def _index(value: int) -> int | None:
    return None if value < 0 else int(value)


class MigNvml:
    """MIG calls against ``library`` (None: ``VGPU_NVML_LIBRARY``, then the system's).

    Pass ``native`` to share an open context; otherwise this object opens (and closes) its own.
    """

    def __init__(self, library: str | None = None, *, native: NvmlContext | None = None) -> None:
        self._owns_native = native is None
        self.native = native if native is not None else NvmlContext(library)
        self._scratch = _Scratch()
        # Interned value objects of the bulk reads, by handle address; dict get/set are
        # atomic, so threads may share them.
        self._gi_handles: dict[int, GpuInstance] = {}
        self._ci_handles: dict[int, ComputeInstance] = {}
        self._placements: dict[tuple[int, int], Placement] = {}

    def close(self) -> None:
        if self._owns_native:
            self.native.close()

    def __enter__(self) -> MigNvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def library(self) -> str:
        return self.native.library

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
        self.native.check(rc, f"nvmlDeviceGetHandleByIndex({index})")
        return DeviceHandle(out[0])

    def device_by_uuid(self, uuid: str) -> DeviceHandle:
        out = ffi.new("vnv_device_t *")
        rc = lib.vnv_device_handle_by_uuid(self.native.ctx, uuid.encode(), out)
        self.native.check(rc, f"nvmlDeviceGetHandleByUUID({uuid})")
        return DeviceHandle(out[0])

    def uuid(self, device: DeviceHandle) -> str:
        """UUID of a physical (``GPU-…``) or MIG (``MIG-…``) device, passed through unchanged."""
        buf = ffi.new("char[]", _UUID_LEN)
        rc = lib.vnv_device_uuid(self.native.ctx, device.ptr, buf, _UUID_LEN)
        self.native.check(rc, "nvmlDeviceGetUUID")
        return ffi.string(buf).decode("utf-8", "replace")

    # -- MIG mode --------------------------------------------------------------------------

    def get_mig_mode(self, device: DeviceHandle) -> tuple[int, int]:
        """(current, pending); ``NOT_SUPPORTED`` means the GPU is not MIG-capable."""
        cur, pend = ffi.new("uint32_t *"), ffi.new("uint32_t *")
        rc = lib.vnv_get_mig_mode(self.native.ctx, device.ptr, cur, pend)
        self.native.check(rc, "nvmlDeviceGetMigMode")
        return int(cur[0]), int(pend[0])

    def set_mig_mode(self, device: DeviceHandle, mode: int) -> int:
        """Set MIG mode; returns the activation status (0 = active now; else e.g. RESET_REQUIRED)."""
        act = ffi.new("int32_t *")
        rc = lib.vnv_set_mig_mode(self.native.ctx, device.ptr, mode, act)
        self.native.check(rc, "nvmlDeviceSetMigMode")
        return int(act[0])

    # -- GPU instances ---------------------------------------------------------------------

    def gpu_instance_profile_info(self, device: DeviceHandle, profile: int) -> GpuInstanceProfile:
        """Profile info for a GI profile constant (the V variant, falling back to v1 without a name)."""
        o = ffi.new("vnv_gi_profile *")
        rc = lib.vnv_gi_profile_info(self.native.ctx, device.ptr, profile, o)
        self.native.check(rc, f"nvmlDeviceGetGpuInstanceProfileInfoV(profile {profile})")
        return GpuInstanceProfile(
            id=o.id,
            slice_count=o.slice_count,
            instance_count=o.instance_count,
            multiprocessor_count=o.multiprocessor_count,
            copy_engine_count=o.copy_engine_count,
            decoder_count=o.decoder_count,
            encoder_count=o.encoder_count,
            jpeg_count=o.jpeg_count,
            ofa_count=o.ofa_count,
            memory_size_mb=int(o.memory_size_mb),
            is_p2p_supported=bool(o.is_p2p_supported),
            name=_name(o.has_name, o.name),
        )

    def gpu_instance_possible_placements(self, device: DeviceHandle, profile_id: int) -> list[Placement]:
        cap = lib.VNV_MAX_INSTANCES
        out, count = ffi.new("vnv_placement[]", cap), ffi.new("uint32_t *")
        rc = lib.vnv_gi_possible_placements(self.native.ctx, device.ptr, profile_id, out, cap, count)
        self.native.check(rc, f"nvmlDeviceGetGpuInstancePossiblePlacements_v2(profileId {profile_id})")
        return [Placement(out[k].start, out[k].size) for k in range(count[0])]

    def create_gpu_instance(
        self, device: DeviceHandle, profile_id: int, placement: Placement | None = None
    ) -> GpuInstance:
        """Create a GI, at ``placement`` when given (``…WithPlacement``), else where NVML chooses."""
        out = ffi.new("vnv_gpu_instance_t *")
        if placement is None:
            rc = lib.vnv_gi_create(self.native.ctx, device.ptr, profile_id, out)
            self.native.check(rc, f"nvmlDeviceCreateGpuInstance(profileId {profile_id})")
        else:
            rc = lib.vnv_gi_create_with_placement(
                self.native.ctx, device.ptr, profile_id, placement.start, placement.size, out
            )
            self.native.check(
                rc,
                f"nvmlDeviceCreateGpuInstanceWithPlacement(profileId {profile_id}, "
                f"start {placement.start}, size {placement.size})",
            )
        return GpuInstance(out[0])

    def gpu_instances(self, device: DeviceHandle, profile_id: int) -> list[GpuInstance]:
        cap = lib.VNV_MAX_INSTANCES
        out, count = ffi.new("vnv_gpu_instance_t[]", cap), ffi.new("uint32_t *")
        rc = lib.vnv_gi_list(self.native.ctx, device.ptr, profile_id, out, cap, count)
        self.native.check(rc, f"nvmlDeviceGetGpuInstances(profileId {profile_id})")
        return [GpuInstance(out[k]) for k in range(count[0])]

    def gpu_instance_by_id(self, device: DeviceHandle, gi_id: int) -> GpuInstance:
        out = ffi.new("vnv_gpu_instance_t *")
        rc = lib.vnv_gi_by_id(self.native.ctx, device.ptr, gi_id, out)
        self.native.check(rc, f"nvmlDeviceGetGpuInstanceById({gi_id})")
        return GpuInstance(out[0])

    def gpu_instance_info(self, gi: GpuInstance) -> GpuInstanceInfo:
        o = ffi.new("vnv_gi_info *")
        with self.native.lock:  # reads the device table to name the parent
            rc = lib.vnv_gi_get_info(self.native.ctx, gi.ptr, o)
        self.native.check(rc, "nvmlGpuInstanceGetInfo")
        return GpuInstanceInfo(
            o.id, o.profile_id, Placement(o.placement_start, o.placement_size), _index(o.device_index)
        )

    def destroy_gpu_instance(self, gi: GpuInstance) -> None:
        """``NVML_ERROR_IN_USE`` when it still has compute instances or processes."""
        self.native.check(lib.vnv_gi_destroy(self.native.ctx, gi.ptr), "nvmlGpuInstanceDestroy")

    # -- compute instances -----------------------------------------------------------------

    def compute_instance_profile_info(
        self,
        gi: GpuInstance,
        profile: int,
        eng_profile: int = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
    ) -> ComputeInstanceProfile:
        o = ffi.new("vnv_ci_profile *")
        rc = lib.vnv_ci_profile_info(self.native.ctx, gi.ptr, profile, eng_profile, o)
        self.native.check(rc, f"nvmlGpuInstanceGetComputeInstanceProfileInfoV(profile {profile})")
        return ComputeInstanceProfile(
            id=o.id,
            slice_count=o.slice_count,
            instance_count=o.instance_count,
            multiprocessor_count=o.multiprocessor_count,
            shared_copy_engine_count=o.shared_copy_engine_count,
            shared_decoder_count=o.shared_decoder_count,
            shared_encoder_count=o.shared_encoder_count,
            shared_jpeg_count=o.shared_jpeg_count,
            shared_ofa_count=o.shared_ofa_count,
            name=_name(o.has_name, o.name),
        )

    def create_compute_instance(self, gi: GpuInstance, profile_id: int) -> ComputeInstance:
        out = ffi.new("vnv_compute_instance_t *")
        rc = lib.vnv_ci_create(self.native.ctx, gi.ptr, profile_id, out)
        self.native.check(rc, f"nvmlGpuInstanceCreateComputeInstance(profileId {profile_id})")
        return ComputeInstance(out[0])

    def compute_instances(self, gi: GpuInstance, profile_id: int) -> list[ComputeInstance]:
        cap = lib.VNV_MAX_INSTANCES
        out, count = ffi.new("vnv_compute_instance_t[]", cap), ffi.new("uint32_t *")
        rc = lib.vnv_ci_list(self.native.ctx, gi.ptr, profile_id, out, cap, count)
        self.native.check(rc, f"nvmlGpuInstanceGetComputeInstances(profileId {profile_id})")
        return [ComputeInstance(out[k]) for k in range(count[0])]

    def compute_instance_info(self, ci: ComputeInstance) -> ComputeInstanceInfo:
        o = ffi.new("vnv_ci_info *")
        with self.native.lock:
            rc = lib.vnv_ci_get_info(self.native.ctx, ci.ptr, o)
        self.native.check(rc, "nvmlComputeInstanceGetInfo_v2")
        return ComputeInstanceInfo(
            o.id,
            o.profile_id,
            Placement(o.placement_start, o.placement_size),
            _index(o.device_index),
            GpuInstance(o.gpu_instance),
        )

    def destroy_compute_instance(self, ci: ComputeInstance) -> None:
        """``NVML_ERROR_IN_USE`` when processes run on it."""
        self.native.check(lib.vnv_ci_destroy(self.native.ctx, ci.ptr), "nvmlComputeInstanceDestroy")

    # -- bulk reads ------------------------------------------------------------------------

    def _placement(self, start: int, size: int) -> Placement:
        p = self._placements.get((start, size))
        if p is None:
            if len(self._placements) >= _INTERN_MAX:
                self._placements.clear()
            p = self._placements[(start, size)] = Placement(start, size)
        return p

    def read_instances(self, device: DeviceHandle, query: InstanceQuery) -> list[GiRow]:
        """Every GI of the queried profiles with its info and (where the query names CI
        profiles) its CIs' handles and ids: one C call for what ``gpu_instances`` +
        ``gpu_instance_info`` + ``compute_instances`` + ``compute_instance_info`` do."""
        s = self._scratch
        gis, cis, st = s.gis, s.cis, s.status
        rc = lib.vnv_mig_read_instances(
            self.native.ctx, device.ptr, query.cdata, query.n_entries, gis, _BULK_CAP, cis, _BULK_CAP, st
        )
        if rc != 0:
            raise self.native.error(rc, _bulk_function(st.call, st.arg))
        n_gi, n_ci = st.n_gi, st.n_ci
        if not n_gi:
            return []
        # Whole rows as ints in two C calls each instead of a cdata per field: the pointer
        # column through a uintptr_t view, the uint32 columns through a uint32_t view.
        gv = ffi.unpack(s.gi_words, n_gi * _GI_WORDS)
        gp = ffi.unpack(s.gi_ptrs, n_gi * _GI_PTRS)
        cv = ffi.unpack(s.ci_words, n_ci * _CI_WORDS) if n_ci else ()
        cp = ffi.unpack(s.ci_ptrs, n_ci * _CI_PTRS) if n_ci else ()
        gi_handles, ci_handles, placements = self._gi_handles, self._ci_handles, self._placements
        out = []
        for k in range(n_gi):
            o = k * _GI_WORDS + _GI_HEAD
            query_index, gi_id, profile_id, start, size, first, count, read = gv[o : o + 8]
            addr = gp[k * _GI_PTRS]
            h = gi_handles.get(addr)
            if h is None:  # cdata pointers and GpuInstance compare by address: reuse is exact
                if len(gi_handles) >= _INTERN_MAX:
                    gi_handles.clear()
                h = gi_handles[addr] = GpuInstance(gis[k].handle)
            ci_rows: list[tuple[ComputeInstance, int, int]] | None = None
            if read:
                ci_rows = []
                for j in range(first, first + count):
                    caddr = cp[j * _CI_PTRS]
                    c = ci_handles.get(caddr)
                    if c is None:
                        if len(ci_handles) >= _INTERN_MAX:
                            ci_handles.clear()
                        c = ci_handles[caddr] = ComputeInstance(cis[j].handle)
                    w = j * _CI_WORDS + _CI_HEAD
                    ci_rows.append((c, cv[w], cv[w + 1]))
            pl = placements.get((start, size)) or self._placement(start, size)
            out.append(_new_tuple(GiRow, (h, query_index, gi_id, profile_id, pl, ci_rows)))
        return out

    def mig_devices(self, device: DeviceHandle) -> list[MigDeviceRow]:
        """Every MIG device of ``device`` (indices answering ``NOT_FOUND`` skipped) with its GI
        id, CI id and UUID: one C call for the ``max_mig_device_count`` / ``mig_device_by_index``
        / ``mig_gpu_instance_id`` / ``mig_compute_instance_id`` / ``uuid`` loop."""
        s = self._scratch
        rows, st = s.migs, s.status
        rc = lib.vnv_mig_devices(self.native.ctx, device.ptr, rows, _BULK_CAP, st)
        if rc != 0:
            raise self.native.error(rc, _bulk_function(st.call, st.arg))
        n = st.n_gi
        if not n:
            return []
        raw = ffi.buffer(rows, n * _MIG_ROW)[:]
        words = ffi.unpack(s.mig_words, n * _MIG_WORDS)
        out = []
        for k in range(n):
            w, b = k * _MIG_WORDS, k * _MIG_ROW + _MIG_UUID_AT
            uuid = raw[b : b + _UUID_LEN].split(b"\0", 1)[0].decode("utf-8", "replace")
            out.append(_new_tuple(MigDeviceRow, (words[w], words[w + 1], words[w + 2], uuid)))
        return out

    # -- MIG devices -----------------------------------------------------------------------

    def max_mig_device_count(self, device: DeviceHandle) -> int:
        count = ffi.new("uint32_t *")
        self.native.check(
            lib.vnv_max_mig_device_count(self.native.ctx, device.ptr, count), "nvmlDeviceGetMaxMigDeviceCount"
        )
        return int(count[0])

    def mig_device_by_index(self, device: DeviceHandle, index: int) -> DeviceHandle:
        """``NVML_ERROR_NOT_FOUND`` for an index without a MIG device (docs/mig.md §6 skips those)."""
        out = ffi.new("vnv_device_t *")
        rc = lib.vnv_mig_device_by_index(self.native.ctx, device.ptr, index, out)
        self.native.check(rc, f"nvmlDeviceGetMigDeviceHandleByIndex({index})")
        return DeviceHandle(out[0])

    def is_mig_device(self, device: DeviceHandle) -> bool:
        out = ffi.new("uint32_t *")
        self.native.check(lib.vnv_is_mig_device(self.native.ctx, device.ptr, out), "nvmlDeviceIsMigDeviceHandle")
        return bool(out[0])

    def mig_gpu_instance_id(self, mig: DeviceHandle) -> int:
        out = ffi.new("uint32_t *")
        self.native.check(lib.vnv_mig_gpu_instance_id(self.native.ctx, mig.ptr, out), "nvmlDeviceGetGpuInstanceId")
        return int(out[0])

    def mig_compute_instance_id(self, mig: DeviceHandle) -> int:
        out = ffi.new("uint32_t *")
        self.native.check(
            lib.vnv_mig_compute_instance_id(self.native.ctx, mig.ptr, out), "nvmlDeviceGetComputeInstanceId"
        )
        return int(out[0])

    def parent_device(self, mig: DeviceHandle) -> DeviceHandle:
        out = ffi.new("vnv_device_t *")
        self.native.check(
            lib.vnv_parent_of_mig_device(self.native.ctx, mig.ptr, out), "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"
        )
        return DeviceHandle(out[0])


__all__ = [
    "CI_PROFILE_FOR_SLICES",
    "ComputeInstance",
    "ComputeInstanceInfo",
    "ComputeInstanceProfile",
    "DeviceHandle",
    "GiRow",
    "GpuInstance",
    "GpuInstanceInfo",
    "GpuInstanceProfile",
    "InstanceQuery",
    "MigDeviceRow",
    "MigNvml",
    "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED",
    "NVML_COMPUTE_INSTANCE_PROFILE_COUNT",
    "NVML_DEVICE_MIG_DISABLE",
    "NVML_DEVICE_MIG_ENABLE",
    "NVML_GPU_INSTANCE_PROFILE_COUNT",
    "NvmlError",
    "Placement",
    "instance_query",
]
