"""Allocate and GetPreferredAllocation behaviour, behind an injectable allocator.

The gRPC server delegates both RPCs to an ``Allocator`` chosen per resource, so the
Volcano-protocol work (pod matching on ``devices-to-allocate``, HAMi-core env and mounts,
volcano-protocol.md §5) plugs in without touching the servers:

- vgpu-memory / vgpu-cores: ``EmptyAllocator`` — one empty ContainerAllocateResponse per
  container request, as upstream.  (vgpu-memory's primary-call role for memory-only
  containers, volcano-protocol.md §5.1, arrives with the Volcano allocator.)
- vgpu-number: ``UnavailableAllocator`` until the Volcano allocator exists: Allocate fails
  with UNIMPLEMENTED and says why, rather than admitting a pod with no GPU limits.

GetPreferredAllocation follows volcano-protocol.md §5.4 step 3 via ``preferred_ids``;
the seam for steering is its ``targets`` argument (the physical GPU UUIDs the scheduler
assigned to the candidate pod).  Without a candidate (all this module knows today) the
preference is: must-include IDs, then the remaining available IDs by (minor, i).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

import grpc

from vgpu.plugin.api import pb

if TYPE_CHECKING:
    from vgpu.plugin.resources import ResourceManager


class AllocationError(Exception):
    """Becomes the gRPC status of the call; the kubelet shows the text to the user
    (UnexpectedAdmissionError).  Default code UNKNOWN, as kubelet-device-plugin-api.md §6."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.code = code


class Allocator(Protocol):
    """What a resource's server delegates Allocate and GetPreferredAllocation to.

    Implementations raise ``AllocationError`` for a refused allocation; any other
    exception is turned into an INTERNAL status by the server (never a crash).
    """

    def allocate(self, resource: "ResourceManager", request: pb.AllocateRequest) -> pb.AllocateResponse: ...

    def preferred_allocation(self, resource: "ResourceManager",
                             request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse: ...


def preferred_ids(available: Sequence[str], must_include: Sequence[str], size: int,
                  order_key: Callable[[str], tuple], targets: Iterable[str] = (),
                  gpu_of: Callable[[str], str | None] = lambda _id: None) -> list[str]:
    """volcano-protocol.md §5.4 step 3: the preferred IDs for one container request.

    1. every must-include ID;
    2. for each target GPU UUID not yet covered, its available ID with the smallest
       ``order_key`` (``gpu_of`` maps an ID to its GPU UUID);
    3. fill up to ``size`` with the remaining available IDs by ``order_key``.
    """
    chosen: list[str] = list(dict.fromkeys(must_include))
    taken = set(chosen)
    rest = sorted((i for i in dict.fromkeys(available) if i not in taken), key=order_key)
    covered = {gpu_of(i) for i in chosen}
    for uuid in dict.fromkeys(targets):
        if len(chosen) >= size or uuid in covered:
            continue
        pick = next((i for i in rest if i not in taken and gpu_of(i) == uuid), None)
        if pick is not None:
            chosen.append(pick)
            taken.add(pick)
            covered.add(uuid)
    for i in rest:
        if len(chosen) >= size:
            break
        if i not in taken:
            chosen.append(i)
            taken.add(i)
    return chosen


def id_order(resource: "ResourceManager") -> Callable[[str], tuple]:
    """Sort key (minor number, i); IDs that are not ours sort last, by text."""
    def key(device_id: str) -> tuple:
        found = resource.locate(device_id)
        return (0, found[0].minor, found[1], "") if found else (1, 0, 0, device_id)
    return key


class EmptyAllocator:
    """Empty responses (vgpu-memory, vgpu-cores) and the no-candidate preference."""

    def allocate(self, resource: "ResourceManager", request: pb.AllocateRequest) -> pb.AllocateResponse:
        return pb.AllocateResponse(container_responses=[pb.ContainerAllocateResponse()
                                                        for _ in request.container_requests])

    def preferred_allocation(self, resource: "ResourceManager",
                             request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse:
        key = id_order(resource)
        return pb.PreferredAllocationResponse(container_responses=[
            pb.ContainerPreferredAllocationResponse(deviceIDs=preferred_ids(
                r.available_deviceIDs, r.must_include_deviceIDs, r.allocation_size, key))
            for r in request.container_requests])


class UnavailableAllocator(EmptyAllocator):
    """vgpu-number until the Volcano-protocol allocator is plugged in: refuse, don't fake it.

    Returning an empty success would start the container with every GPU visible and no
    HAMi-core limits (plugin#40); a clear UNIMPLEMENTED error fails the pod instead.
    """

    MESSAGE = ("{resource}: Allocate needs the Volcano pod protocol (devices-to-allocate matching and "
               "HAMi-core env/mounts), which this build does not provide")

    def allocate(self, resource: "ResourceManager", request: pb.AllocateRequest) -> pb.AllocateResponse:
        raise AllocationError(self.MESSAGE.format(resource=resource.resource_name), grpc.StatusCode.UNIMPLEMENTED)
