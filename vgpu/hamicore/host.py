"""The host side of one container's hami-core Allocate (docs/hami-core.md §2, docs/protocol.md §5.3).

:func:`prepare_container` is the one call Allocate makes: it checks the mounted HAMi-core files,
builds the env and mounts (:func:`vgpu.hamicore.contract.build_container_contract`, the one
builder of both) and creates the container's cache directory and ``/tmp/vgpulock`` — in that
order, so a refused contract leaves nothing new on the host.  Every failure is a
:class:`ContainerPrepareError` whose text the pod's Event and the kubelet show.
"""

from __future__ import annotations

from collections.abc import Sequence

from vgpu.hamicore import paths
from vgpu.hamicore.contract import ContainerContract, ContractError, DeviceGrant, build_container_contract


class ContainerPrepareError(RuntimeError):
    """HAMi-core cannot be set up for this container; the message is user-facing."""


def prepare_container(
    layout: paths.HostLayout,
    *,
    devices: Sequence[DeviceGrant],
    pod_uid: str,
    container_name: str,
    cuda_disable_control: str | None,
    gpu_core_policy: str,
    lib_cuda_log_level: int | None,
    memory_factor: int,
) -> ContainerContract:
    """Files checked, contract built, host directories made; ``devices`` in in-container NVML order."""
    try:
        paths.check_hami_core_files(layout)
    except paths.HamiCoreFilesMissing as exc:
        raise ContainerPrepareError(str(exc)) from None
    try:
        contract = build_container_contract(
            devices=devices,
            pod_uid=pod_uid,
            container_name=container_name,
            hook_path=layout.hook_path,
            cuda_disable_control=cuda_disable_control,
            gpu_core_policy=gpu_core_policy,
            lib_cuda_log_level=lib_cuda_log_level,
            memory_factor=memory_factor,
            vgpulock_dir=layout.vgpulock_dir,
        )
        paths.prepare_container_dir(layout, pod_uid, container_name)
    except (ContractError, paths.HostPathError, OSError, ValueError) as exc:
        raise ContainerPrepareError(f"cannot prepare HAMi-core for container {container_name}: {exc}") from None
    return contract
