"""What the gRPC servers delegate Allocate and GetPreferredAllocation to, and how answers are made.

The server of each resource hands both RPCs to an ``Allocator``, so the Volcano-protocol work
(pod matching on ``devices-to-allocate``, HAMi-core env and mounts, docs/protocol.md §5,
:mod:`vgpu.plugin.allocator`) plugs in without touching the servers.  Without API access:

- vgpu-memory / vgpu-cores: ``EmptyAllocator`` — one empty ContainerAllocateResponse per
  container request, as upstream.
- vgpu-number: ``UnavailableAllocator``: Allocate fails with UNIMPLEMENTED and says why, rather
  than admitting a pod with no GPU limits.

:func:`container_response` is the one conversion of a container's env and mounts to protobuf.
:class:`DeviceListAllocator` wraps the allocators when ``--device-list-strategy`` is more than
``envvar``: it passes each response's device list as the strategies say
(:class:`vgpu.plugin.cdi.DeviceListPolicy`, docs/cdi.md §3) and keeps every other env var and mount.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import grpc

from vgpu.hamicore.contract import Mount
from vgpu.plugin.api import pb
from vgpu.plugin.cdi import CdiNameError, DeviceListPolicy, response_cdi_names
from vgpu.plugin.preference import id_order, numa_of, preferred_ids
from vgpu.protocol.cdi import CdiError

if TYPE_CHECKING:
    from vgpu.plugin.resources import ResourceManager


# Why an Allocate failed: the ``reason`` label of ``vgpu_plugin_allocations_total`` (docs/metrics.md §10.1).
REASON_INVALID = "invalid_request"  # the pod's annotations or the call itself cannot be served
REASON_NO_POD = "no_pod"
REASON_UNHEALTHY = "unhealthy_gpu"
REASON_DEVICE = "device_mismatch"  # an assigned GPU is not on this node or not in the node's mode
REASON_HOST = "host_setup"  # HAMi-core files or the container directory
REASON_MIG = "mig"
REASON_OVERCOMMIT = "overcommit"  # the scheduler assigned more than the GPU holds (docs/decisions.md decision 11)
REASON_API = "api_write"
REASON_NO_API = "no_api_access"
REASON_INTERNAL = "internal"
FAILURE_REASONS = (
    REASON_INVALID,
    REASON_NO_POD,
    REASON_UNHEALTHY,
    REASON_DEVICE,
    REASON_HOST,
    REASON_MIG,
    REASON_OVERCOMMIT,
    REASON_API,
    REASON_NO_API,
    REASON_INTERNAL,
)


class AllocationError(Exception):
    """Becomes the gRPC status of the call; the kubelet shows the text to the user
    (UnexpectedAdmissionError).  Default code UNKNOWN, as docs/kubelet-api.md §6.
    ``reason`` is one of :data:`FAILURE_REASONS`, for the metrics."""

    def __init__(
        self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN, *, reason: str = REASON_INVALID
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class Allocator(Protocol):
    """What a resource's server delegates Allocate and GetPreferredAllocation to.

    Implementations raise ``AllocationError`` for a refused allocation; any other
    exception is turned into an INTERNAL status by the server (never a crash).
    """

    def allocate(self, resource: ResourceManager, request: pb.AllocateRequest) -> pb.AllocateResponse: ...

    def preferred_allocation(
        self, resource: ResourceManager, request: pb.PreferredAllocationRequest
    ) -> pb.PreferredAllocationResponse: ...


def container_response(
    envs: Mapping[str, str] | None = None, mounts: Sequence[Mount] = ()
) -> pb.ContainerAllocateResponse:
    """One container's answer on the wire: its env and mounts (empty for a non-primary call)."""
    return pb.ContainerAllocateResponse(
        envs=dict(envs or {}),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only) for m in mounts
        ],
    )


class EmptyAllocator:
    """Empty responses (vgpu-memory, vgpu-cores) and the no-candidate preference."""

    def allocate(self, resource: ResourceManager, request: pb.AllocateRequest) -> pb.AllocateResponse:
        return pb.AllocateResponse(
            container_responses=[pb.ContainerAllocateResponse() for _ in request.container_requests]
        )

    def preferred_allocation(
        self, resource: ResourceManager, request: pb.PreferredAllocationRequest
    ) -> pb.PreferredAllocationResponse:
        key, node_of = id_order(resource), numa_of(resource)
        return pb.PreferredAllocationResponse(
            container_responses=[
                pb.ContainerPreferredAllocationResponse(
                    deviceIDs=preferred_ids(
                        r.available_deviceIDs, r.must_include_deviceIDs, r.allocation_size, key, numa_of=node_of
                    )
                )
                for r in request.container_requests
            ]
        )


class UnavailableAllocator(EmptyAllocator):
    """vgpu-number without API access: refuse, don't fake it.

    Returning an empty success would start the container with every GPU visible and no
    HAMi-core limits (plugin#40); a clear UNIMPLEMENTED error fails the pod instead.
    """

    MESSAGE = (
        "{resource}: Allocate needs the Volcano pod protocol (devices-to-allocate matching and "
        "HAMi-core env/mounts), which this build does not provide"
    )

    def allocate(self, resource: ResourceManager, request: pb.AllocateRequest) -> pb.AllocateResponse:
        raise AllocationError(
            self.MESSAGE.format(resource=resource.resource_name), grpc.StatusCode.UNIMPLEMENTED, reason=REASON_NO_API
        )


class DeviceListAllocator:
    """Another allocator's answers, with the device list passed per :class:`DeviceListPolicy`.

    ``names`` maps a device ID to its CDI device name; ``handed_out`` is told every CDI name a
    response returns (the spec check, :mod:`vgpu.plugin.cdi_specs`) and must not raise.
    """

    def __init__(
        self,
        inner: Allocator,
        policy: DeviceListPolicy,
        names: Callable[[str], str],
        handed_out: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.inner = inner
        self.policy = policy
        self.names = names
        self.handed_out = handed_out

    def allocate(self, resource: ResourceManager, request: pb.AllocateRequest) -> pb.AllocateResponse:
        resp = self.inner.allocate(resource, request)
        try:
            out = [self.policy.apply(r, self.names) for r in resp.container_responses]
        except (CdiNameError, CdiError) as exc:  # a device the strategy cannot name: fail, never INTERNAL
            raise AllocationError(str(exc), reason=REASON_DEVICE) from None
        if self.handed_out is not None:
            for r in out:
                cdi_names = response_cdi_names(r, self.policy.annotation_prefix)
                if cdi_names:
                    self.handed_out(cdi_names)
        return pb.AllocateResponse(container_responses=out)

    def preferred_allocation(
        self, resource: ResourceManager, request: pb.PreferredAllocationRequest
    ) -> pb.PreferredAllocationResponse:
        return self.inner.preferred_allocation(resource, request)
