"""GetPreferredAllocation's choice of device IDs (docs/protocol.md §5.4 step 3).

The seam for steering is the ``targets`` argument of :func:`preferred_ids`: the physical GPU
UUIDs the scheduler assigned to the candidate pod (the Volcano allocator finds it).  Without a
candidate the preference is: must-include IDs, then the remaining available IDs by (minor, i),
those of one NUMA node first (docs/kubelet-api.md §7.4).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vgpu.plugin.resources import ResourceManager


def preferred_ids(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    order_key: Callable[[str], tuple],
    targets: Iterable[str] = (),
    gpu_of: Callable[[str], str | None] = lambda _id: None,
    numa_of: Callable[[str], int | None] = lambda _id: None,
) -> list[str]:
    """docs/protocol.md §5.4 step 3: the preferred IDs for one container request.

    1. every must-include ID;
    2. for each target GPU UUID not yet covered, its available ID with the smallest
       ``order_key`` (``gpu_of`` maps an ID to its GPU UUID);
    3. fill up to ``size`` with the remaining available IDs by ``order_key``, those on one
       NUMA node first (``numa_of``; :func:`fill_node`).
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
    node = fill_node(chosen, [i for i in rest if i not in taken], size - len(chosen), numa_of)
    if node is not None:
        rest = [i for i in rest if numa_of(i) == node] + [i for i in rest if numa_of(i) != node]
    for i in rest:
        if len(chosen) >= size:
            break
        if i not in taken:
            chosen.append(i)
            taken.add(i)
    return chosen


def fill_node(
    chosen: Sequence[str], rest: Sequence[str], needed: int, numa_of: Callable[[str], int | None]
) -> int | None:
    """The NUMA node the fill step prefers, or None to keep plain ``order_key`` order.

    When IDs are already chosen (must-include, the scheduler's GPUs), the node of the first of
    them that has one: the kubelet's Topology Manager aligns to it.  Otherwise the first node, in
    ``rest``'s order, with ``needed`` IDs available, so a container's IDs come from one node when
    one node can hold them all.
    """
    if needed <= 0:
        return None
    for i in chosen:
        node = numa_of(i)
        if node is not None:
            return node
    counts: dict[int, int] = {}
    for i in rest:
        node = numa_of(i)
        if node is not None:
            counts[node] = counts.get(node, 0) + 1
            if counts[node] >= needed:
                return node
    return None


def id_order(resource: ResourceManager) -> Callable[[str], tuple]:
    """Sort key (minor number, i); IDs that are not ours sort last, by text."""

    def key(device_id: str) -> tuple:
        found = resource.locate(device_id)
        return (0, found[0].minor, found[1], "") if found else (1, 0, 0, device_id)

    return key


def gpu_of(resource: ResourceManager) -> Callable[[str], str | None]:
    """Maps a device ID of ``resource`` to its GPU's UUID (None for IDs that are not ours)."""

    def uuid_of(device_id: str) -> str | None:
        found = resource.locate(device_id)
        return found[0].uuid if found else None

    return uuid_of


def numa_of(resource: ResourceManager) -> Callable[[str], int | None]:
    """Maps a device ID of ``resource`` to its GPU's NUMA node (None: unknown, or not ours)."""

    def node_of(device_id: str) -> int | None:
        found = resource.locate(device_id)
        return found[0].numa_node if found else None

    return node_of
