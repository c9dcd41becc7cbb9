"""The container contract for a hami-core allocation: env vars and mounts, built in ONE place.

Allocate (docs/protocol.md §5.3) converts the result to protobuf; the monitor, the demo
and tests reuse it.  Inputs are plain data, so this module does no I/O: Allocate calls it through
:func:`vgpu.hamicore.host.prepare_container`, which also checks the HAMi-core files and creates
the host directory before answering.
"""

from __future__ import annotations

import os
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.hamicore import paths
from vgpu.hamicore.layouts import MAX_DEVICES
from vgpu.hamicore.limits import TASK_PRIORITY_ENV, memory_limit_env, sm_limit_env, task_priority_from_env

GPU_CORE_POLICIES = ("default", "force", "disable")

# strconv.ParseBool (Go): what CUDA_DISABLE_CONTROL must be for the preload mount to be skipped.
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


class ContractError(ValueError):
    """Input that cannot become a valid HAMi-core contract; the message names the field."""


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True)
class DeviceGrant:
    """One GPU given to the container, in in-container NVML order (ascending PCI bus id)."""

    uuid: str
    memory_mib: int  # usedmem from the annotation (multiplied by memory_factor here)
    cores: int  # usedcores, percent; 0 = unlimited


@dataclass(frozen=True)
class ContainerContract:
    envs: dict[str, str]
    mounts: list[Mount]
    host_cache_dir: str  # $HOOK_PATH/containers/<podUID>_<ctr>
    cache_file: str  # CUDA_DEVICE_MEMORY_SHARED_CACHE (container path)
    host_cache_file: str  # the same file on the host
    preload_mounted: bool  # False when CUDA_DISABLE_CONTROL is true
    zero_memory_devices: tuple[int, ...] = field(default=())  # → Event VGPUZeroMemoryLimit


def cuda_disable_control_is_true(value: str | None) -> bool:
    """Go ``strconv.ParseBool(value)`` is true (unparsable values count as false, as in HAMi)."""
    return value is not None and value in _GO_TRUE


def pod_task_priority(container: Mapping[str, Any]) -> int | None:
    """The priority libvgpu will stamp into this container's region, when its pod spec decides it.

    The plugin never sets ``CUDA_TASK_PRIORITY`` (docs/hami-core.md §3.1), so the container gets
    the value its own spec gives: the last ``env`` entry of that name wins over ``envFrom`` and the
    image's ``ENV``, as in the kubelet.  That entry's literal ``value`` (missing = empty) decides
    it.  None when the spec does not: no such entry (``envFrom`` or the image may set it), a
    ``valueFrom``, or a ``$(VAR)`` reference the kubelet would expand — the pod's author controls
    those too, so the monitor then takes the region's value (docs/metrics.md §5.1).
    """
    entry: Mapping[str, Any] | None = None
    for e in container.get("env") or ():
        if isinstance(e, Mapping) and e.get("name") == TASK_PRIORITY_ENV:
            entry = e
    if entry is None or entry.get("valueFrom") is not None:
        return None
    value = entry.get("value")
    if value is None:
        value = ""
    if not isinstance(value, str) or "$(" in value:
        return None
    return task_priority_from_env(value)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ContractError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def build_container_contract(
    *,
    devices: Sequence[DeviceGrant],
    pod_uid: str,
    container_name: str,
    hook_path: str = paths.DEFAULT_HOOK_PATH,
    cuda_disable_control: str | None = None,
    gpu_core_policy: str = "default",
    lib_cuda_log_level: int | None = None,
    memory_factor: int = 1,
    cache_uuid: str | None = None,
    vgpulock_dir: str = paths.VGPULOCK_DIR,
) -> ContainerContract:
    """Env and mounts for one container's hami-core allocation.

    docs/protocol.md §5.3; docs/decisions.md decisions 5 and 7.

    ``devices`` must already be in in-container NVML order: index ``i`` of the limit variables
    is the position in this sequence.  ``cuda_disable_control`` is the container's own
    ``CUDA_DISABLE_CONTROL`` value (None when unset).  ``cache_uuid`` defaults to a fresh
    UUIDv4, so every Allocate gets a new file and new limits always apply (HAMi-core#191).
    """
    if not devices:
        raise ContractError("devices: a hami-core allocation needs at least one GPU")
    if len(devices) > MAX_DEVICES:
        raise ContractError(f"devices: HAMi-core supports at most {MAX_DEVICES} GPUs per container, got {len(devices)}")
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        if not dev.uuid or any(c in dev.uuid for c in ", \t\n;:") or not dev.uuid.isprintable():
            raise ContractError(f"devices[{i}].uuid: invalid GPU UUID {dev.uuid!r}")
        if dev.uuid in seen:
            raise ContractError(f"devices[{i}].uuid: {dev.uuid} is listed twice")
        seen.add(dev.uuid)
        _check_int(f"devices[{i}].memory_mib", dev.memory_mib, 0)
        _check_int(f"devices[{i}].cores", dev.cores, 0)
    _check_int("memory_factor", memory_factor, 1)
    if gpu_core_policy not in GPU_CORE_POLICIES:
        raise ContractError(f"gpuCorePolicy: must be one of {', '.join(GPU_CORE_POLICIES)}, got {gpu_core_policy!r}")
    if lib_cuda_log_level is not None:
        _check_int("libCudaLogLevel", lib_cuda_log_level, 0)
    try:
        paths.container_dir_name(pod_uid, container_name)
    except ValueError as exc:
        raise ContractError(str(exc)) from None
    if cache_uuid is None:
        cache_uuid = str(uuidlib.uuid4())
    else:
        try:
            if str(uuidlib.UUID(cache_uuid)) != cache_uuid:
                raise ValueError
        except ValueError:
            raise ContractError(f"cache_uuid: {cache_uuid!r} is not a lowercase UUID") from None

    for name, value in (("hook_path", hook_path), ("vgpulock_dir", vgpulock_dir)):
        if not isinstance(value, str) or not value.startswith("/"):
            raise ContractError(f"{name}: mount host paths must be absolute, got {value!r}")
    layout = paths.HostLayout(hook_path=os.path.normpath(hook_path), vgpulock_dir=os.path.normpath(vgpulock_dir))
    envs: dict[str, str] = {"NVIDIA_VISIBLE_DEVICES": ",".join(d.uuid for d in devices)}
    zero = []
    for i, dev in enumerate(devices):
        mib = dev.memory_mib * memory_factor
        if mib == 0:
            zero.append(i)
        envs[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = memory_limit_env(mib)
    envs["CUDA_DEVICE_SM_LIMIT"] = sm_limit_env(devices[0].cores)  # upstream-compatible
    for i, dev in enumerate(devices):
        envs[f"CUDA_DEVICE_SM_LIMIT_{i}"] = sm_limit_env(dev.cores)
    cache_file = paths.container_cache_file(cache_uuid)
    envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = cache_file
    if gpu_core_policy != "default":
        envs["GPU_CORE_UTILIZATION_POLICY"] = gpu_core_policy
    if lib_cuda_log_level is not None:
        envs["LIBCUDA_LOG_LEVEL"] = str(lib_cuda_log_level)

    host_dir = layout.container_dir(pod_uid, container_name)
    preload = not cuda_disable_control_is_true(cuda_disable_control)
    mounts = [Mount(paths.CONTAINER_LIBVGPU, layout.libvgpu, True)]
    if preload:
        mounts.append(Mount(paths.CONTAINER_LD_SO_PRELOAD, layout.ld_so_preload, True))
    mounts.append(Mount(paths.CONTAINER_CACHE_DIR, host_dir, False))
    mounts.append(Mount(paths.CONTAINER_VGPULOCK, layout.vgpulock_dir, False))
    return ContainerContract(
        envs=envs,
        mounts=mounts,
        host_cache_dir=host_dir,
        cache_file=cache_file,
        host_cache_file=layout.host_cache_file(pod_uid, container_name, cache_uuid),
        preload_mounted=preload,
        zero_memory_devices=tuple(zero),
    )
