"""The exported metric families: names, help strings, types and label names (docs/metrics.md §2–§3).

Pure data.  The legacy Volcano families are exact, typos included (``meory``), and
``Device_memory_desc_of_container`` is a counter under exactly that name.  Every sample of these
families carries ``zone="vGPU"``.
"""

from __future__ import annotations

from dataclasses import dataclass

ZONE = 'zone="vGPU"'


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    type: str
    labels: tuple[str, ...]  # without ``zone``


_LEGACY_CTR = ("podnamespace", "podname", "ctrname", "vdeviceid", "deviceuuid")
_HAMI_CTR = ("namespace", "pod", "container", "vdevice_index", "device_uuid")
_HAMI_HOST = ("node", "device_index", "device_uuid", "device_type")

# ---- legacy Volcano (docs/metrics.md §2) ----------------------------------------------------------------
HOST_GPU_MEMORY_USAGE = Family("HostGPUMemoryUsage", "GPU device memory usage", "gauge", ("deviceidx", "deviceuuid"))
HOST_CORE_UTILIZATION = Family("HostCoreUtilization", "GPU core utilization", "gauge", ("deviceidx", "deviceuuid"))
VGPU_MEMORY_USAGE = Family("vGPU_device_memory_usage_in_bytes", "vGPU device usage", "gauge", _LEGACY_CTR)
VGPU_MEMORY_LIMIT = Family("vGPU_device_memory_limit_in_bytes", "vGPU device limit", "gauge", _LEGACY_CTR)
DEVICE_MEMORY_DESC = Family(
    "Device_memory_desc_of_container",
    "Container device meory description",
    "counter",
    _LEGACY_CTR + ("context", "module", "data", "offset"),
)
DEVICE_UTILIZATION_DESC = Family(
    "Device_utilization_desc_of_container", "Container device utilization description", "gauge", _LEGACY_CTR
)
DEVICE_LAST_KERNEL = Family(
    "Device_last_kernel_of_container", "Container device last kernel description", "gauge", _LEGACY_CTR
)

LEGACY_HOST = (HOST_GPU_MEMORY_USAGE, HOST_CORE_UTILIZATION)
LEGACY_CONTAINER = (
    VGPU_MEMORY_USAGE,
    VGPU_MEMORY_LIMIT,
    DEVICE_MEMORY_DESC,
    DEVICE_UTILIZATION_DESC,
    DEVICE_LAST_KERNEL,
)

# ---- HAMi v2.10 (docs/metrics.md §3) --------------------------------------------------------------------
HAMI_HOST_MEMORY_USED = Family(
    "hami_host_gpu_memory_used_bytes", "GPU device memory usage in bytes", "gauge", _HAMI_HOST
)
HAMI_HOST_UTILIZATION = Family(
    "hami_host_gpu_utilization_ratio", "GPU core utilization ratio (0-100)", "gauge", _HAMI_HOST
)
HAMI_HOST_MEMCTL_UTILIZATION = Family(
    "hami_host_gpu_memory_controller_utilization_ratio",
    "GPU memory controller utilization ratio (0-100)",
    "gauge",
    ("device_index", "device_uuid", "device_type"),
)
HAMI_VGPU_MEMORY_USED = Family("hami_vgpu_memory_used_bytes", "vGPU device memory usage in bytes", "gauge", _HAMI_CTR)
HAMI_VGPU_MEMORY_LIMIT = Family("hami_vgpu_memory_limit_bytes", "vGPU device memory limit in bytes", "gauge", _HAMI_CTR)
HAMI_CONTAINER_MEMORY = Family(
    "hami_container_device_memory_bytes", "Container device memory usage in bytes", "gauge", _HAMI_CTR
)
HAMI_CONTAINER_UTILIZATION = Family(
    "hami_container_device_utilization_ratio", "Container device SM utilization ratio", "gauge", _HAMI_CTR
)
HAMI_CONTAINER_LAST_KERNEL = Family(
    "hami_container_last_kernel_elapsed_seconds", "Seconds since last kernel execution in container", "gauge", _HAMI_CTR
)
HAMI_MEMORY_CONTEXT = Family(
    "hami_vgpu_memory_context_bytes", "Container device memory context size in bytes", "gauge", _HAMI_CTR
)
HAMI_MEMORY_MODULE = Family(
    "hami_vgpu_memory_module_bytes", "Container device memory module size in bytes", "gauge", _HAMI_CTR
)
HAMI_MEMORY_BUFFER = Family(
    "hami_vgpu_memory_buffer_bytes", "Container device memory buffer size in bytes", "gauge", _HAMI_CTR
)
HAMI_MIG_DEVICE_INFO = Family(
    "hami_mig_device_info",
    "MIG runtime identity for a container allocation",
    "gauge",
    _HAMI_CTR[:4] + ("device_uuid", "mig_uuid", "profile", "gpu_instance_id", "compute_instance_id"),
)

# ---- allocation, from this node's pods' vgpu-ids-new (docs/metrics.md §3.1) ---------------------------
# The names and labels HAMi's scheduler exports for the same values (cluster-wide there; the
# monitor exports its node's share), ``zone="vGPU"`` included.  Legacy names go with the legacy
# switch, ``hami_*`` with the HAMi switch.  ``container`` is our addition: it joins the usage families.
_HAMI_ALLOC_GPU = ("node", "device_uuid", "device_index", "device_type")
_LEGACY_ALLOC_GPU = ("nodeid", "deviceuuid", "deviceidx", "devicetype")
_HAMI_ALLOC_CTR = ("namespace", "node", "pod", "container_index", "device_uuid", "container")
_LEGACY_ALLOC_CTR = ("podnamespace", "nodename", "podname", "containeridx", "deviceuuid", "container")

HAMI_GPU_MEMORY_LIMIT = Family(
    "hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU", "gauge", _HAMI_ALLOC_GPU
)
HAMI_GPU_CORE_LIMIT = Family(
    "hami_gpu_core_limit_ratio", "Device core limit for a certain GPU", "gauge", _HAMI_ALLOC_GPU
)
HAMI_GPU_MEMORY_ALLOCATED = Family(
    "hami_gpu_memory_allocated_bytes",
    "Device memory allocated for a certain GPU",
    "gauge",
    ("node", "device_uuid", "device_index", "device_cores", "device_type"),
)
HAMI_GPU_CORE_ALLOCATED = Family(
    "hami_gpu_core_allocated_ratio", "Device core allocated for a certain GPU", "gauge", _HAMI_ALLOC_GPU
)
HAMI_GPU_SHARED_COUNT = Family(
    "hami_gpu_shared_count", "Number of containers sharing this GPU", "gauge", _HAMI_ALLOC_GPU
)
VGPU_GPU_SHARED_LIMIT = Family(
    "vgpu_gpu_shared_limit", "Containers that may share this GPU (deviceSplitCount)", "gauge", _HAMI_ALLOC_GPU
)
HAMI_VGPU_MEMORY_ALLOCATED = Family(
    "hami_vgpu_memory_allocated_bytes", "vGPU memory allocated from a container", "gauge", _HAMI_ALLOC_CTR
)
HAMI_VGPU_CORE_ALLOCATED = Family(
    "hami_vgpu_core_allocated_ratio", "vGPU core allocated from a container", "gauge", _HAMI_ALLOC_CTR
)
LEGACY_GPU_MEMORY_LIMIT = Family(
    "GPUDeviceMemoryLimit", "Device memory limit for a certain GPU", "gauge", _LEGACY_ALLOC_GPU
)
LEGACY_GPU_CORE_LIMIT = Family(
    "GPUDeviceCoreLimit", "Device memory core limit for a certain GPU", "gauge", _LEGACY_ALLOC_GPU
)
LEGACY_GPU_MEMORY_ALLOCATED = Family(
    "GPUDeviceMemoryAllocated",
    "Device memory allocated for a certain GPU",
    "gauge",
    ("nodeid", "deviceuuid", "deviceidx", "devicecores", "devicetype"),
)
LEGACY_GPU_CORE_ALLOCATED = Family(
    "GPUDeviceCoreAllocated", "Device core allocated for a certain GPU", "gauge", _LEGACY_ALLOC_GPU
)
LEGACY_GPU_SHARED_NUM = Family(
    "GPUDeviceSharedNum", "Number of containers sharing this GPU", "gauge", _LEGACY_ALLOC_GPU
)
LEGACY_VGPU_MEMORY_ALLOCATED = Family(
    "vGPUMemoryAllocated", "vGPU memory allocated from a container", "gauge", _LEGACY_ALLOC_CTR
)
LEGACY_VGPU_CORE_ALLOCATED = Family(
    "vGPUCoreAllocated", "vGPU core allocated from a container", "gauge", _LEGACY_ALLOC_CTR
)

HAMI_ALLOCATION = (
    HAMI_GPU_MEMORY_LIMIT,
    HAMI_GPU_CORE_LIMIT,
    HAMI_GPU_MEMORY_ALLOCATED,
    HAMI_GPU_CORE_ALLOCATED,
    HAMI_GPU_SHARED_COUNT,
    VGPU_GPU_SHARED_LIMIT,
    HAMI_VGPU_MEMORY_ALLOCATED,
    HAMI_VGPU_CORE_ALLOCATED,
)
LEGACY_ALLOCATION = (
    LEGACY_GPU_MEMORY_LIMIT,
    LEGACY_GPU_CORE_LIMIT,
    LEGACY_GPU_MEMORY_ALLOCATED,
    LEGACY_GPU_CORE_ALLOCATED,
    LEGACY_GPU_SHARED_NUM,
    LEGACY_VGPU_MEMORY_ALLOCATED,
    LEGACY_VGPU_CORE_ALLOCATED,
)

HAMI_HOST = (HAMI_HOST_MEMORY_USED, HAMI_HOST_UTILIZATION, HAMI_HOST_MEMCTL_UTILIZATION)
HAMI_CONTAINER = (
    HAMI_VGPU_MEMORY_USED,
    HAMI_VGPU_MEMORY_LIMIT,
    HAMI_CONTAINER_MEMORY,
    HAMI_CONTAINER_UTILIZATION,
    HAMI_CONTAINER_LAST_KERNEL,
    HAMI_MEMORY_CONTEXT,
    HAMI_MEMORY_MODULE,
    HAMI_MEMORY_BUFFER,
)

ALL = (
    LEGACY_HOST
    + LEGACY_CONTAINER
    + HAMI_HOST
    + HAMI_CONTAINER
    + (HAMI_MIG_DEVICE_INFO,)
    + HAMI_ALLOCATION
    + LEGACY_ALLOCATION
)
