"""What the gRPC servers delegate Allocate and GetPreferredAllocation to, and how answers are made.

The server of each resource hands both RPCs to an ``Allocator``, so the Volcano-protocol work
(pod matching on ``devices-to-allocate``, HAMi-core env and mounts, docs/protocol.md §5,
:mod:`vgpu.plugin.allocator`) plugs in without touching the servers.  Without API access:

- vgpu-memory / vgpu-cores: ``EmptyAllocator`` — one empty ContainerAllocateResponse per
  container request, as upstream.
- vgpu-number: ``UnavailableAllocator``: Allocate fails with UNIMPLEMENTED and says why, rather
  than admitting a pod with no GPU limits.

:func:`container_response` is the one conversion of a container's env and mounts to protobuf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import grpc

from vgpu.hamicore.contract import Mount
from vgpu.plugin.api import pb
from vgpu.plugin.preference import id_order, numa_of, preferred_ids

if TYPE_CHECKING:
    from vgpu.plugin.resources import ResourceManager


class AllocationError(Exception):
    """Becomes the gRPC status of the call; the kubelet shows the text to the user
    (UnexpectedAdmissionError).  Default code UNKNOWN, as docs/kubelet-api.md §6."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.code = code


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
        raise AllocationError(self.MESSAGE.format(resource=resource.resource_name), grpc.StatusCode.UNIMPLEMENTED)
