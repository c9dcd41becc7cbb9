"""Placement plans: which GPU instance serves which position of a group (docs/mig.md §6). Pure.

A group expands into positions: type 1 repeated ``count₁`` times, then type 2, … in config
order, so position k has type ``t(k)``.  The plan gives each position one placement: the
lexicographically smallest assignment found by searching positions 0…P−1 in order, trying
the profile's possible placements by ascending ``start``, rejecting one that overlaps a
memory-slice range already chosen, and backtracking on dead ends.

The plan depends only on the geometry and NVML's placement lists, so the plugin (apply) and
the monitor (identity metrics) compute the same one, and it survives restarts: position k is
always the instance with ``profileId == t(k).profile_id`` at ``placement.start == plan[k].start``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from vgpu.config.model import MigGroup
from vgpu.mig.errors import MigConfigError
from vgpu.mig.profiles import ProfileCatalog, ProfileInfo
from vgpu.nvml.mig_calls import Placement


@dataclass(frozen=True)
class PlannedInstance:
    """Position k of a group: its instance type and where its GPU instance lives."""

    position: int
    name: str  # the geometry's instance name, as configured ("2g.20gb")
    memory_mib: int  # the geometry's memory value (what the scheduler fits against)
    profile: ProfileInfo
    placement: Placement

    @cached_property  # immutable: computed once (apply/resolve ask for it on every call)
    def key(self) -> tuple[int, int]:
        """(profileId, start): how an existing GPU instance is recognised as this position's."""
        return (self.profile.profile_id, self.placement.start)


@dataclass(frozen=True)
class GroupPlan:
    group: str
    instances: tuple[PlannedInstance, ...]

    def __len__(self) -> int:
        return len(self.instances)

    def at(self, position: int) -> PlannedInstance:
        return self.instances[position]

    @cached_property
    def keys(self) -> frozenset[tuple[int, int]]:
        return frozenset(i.key for i in self.instances)


def _overlaps(a: Placement, b: Placement) -> bool:
    return a.start < b.start + b.size and b.start < a.start + a.size


def _mask(p: Placement) -> int:
    return ((1 << p.size) - 1) << p.start


def place(profiles: list[ProfileInfo]) -> list[Placement] | None:
    """The lexicographically smallest non-overlapping placement per position, or None.

    Depth-first over positions in order and placements by ascending start, so the first
    complete assignment found is the smallest.  Dead (position, used-slices) states are
    remembered, which bounds the search by positions × 2^memory-slices.
    """
    options = [sorted(p.placements, key=lambda pl: (pl.start, pl.size)) for p in profiles]
    dead: set[tuple[int, int]] = set()
    chosen: list[Placement] = []

    def search(k: int, used: int) -> bool:
        if k == len(options):
            return True
        if (k, used) in dead:
            return False
        for pl in options[k]:
            m = _mask(pl)
            if used & m:
                continue
            chosen.append(pl)
            if search(k + 1, used | m):
                return True
            chosen.pop()
        dead.add((k, used))
        return False

    return list(chosen) if search(0, 0) else None


def plan_group(group: MigGroup, catalog: ProfileCatalog) -> GroupPlan:
    """Resolve a group's instance types against the GPU's profiles and place them.

    Raises ``MigConfigError`` naming the group for an unknown profile name, more instances of
    a profile than the GPU allows, more compute slices than the GPU has, or no placement.
    """
    positions: list[tuple[str, int, ProfileInfo]] = []
    for template in group.geometries:
        profile = catalog.by_name(template.name)
        if profile is None:
            known = ", ".join(p.name for p in catalog.profiles) or "none"
            raise MigConfigError(
                f"MIG group {group.group}: unknown MIG profile {template.name} on this GPU (NVML offers {known})"
            )
        positions.extend((template.name, template.memory_mib, profile) for _ in range(template.count))
    if not positions:
        raise MigConfigError(f"MIG group {group.group}: no instances")
    for profile_id, n in Counter(p.profile_id for _, _, p in positions).items():
        profile = catalog.by_id(profile_id)
        assert profile is not None
        if n > profile.instance_count:
            raise MigConfigError(
                f"MIG group {group.group} is infeasible: {n} × {profile.name}, but the GPU "
                f"allows at most {profile.instance_count}"
            )
    slices = sum(p.slice_count for _, _, p in positions)
    if catalog.full_slices and slices > catalog.full_slices:
        raise MigConfigError(
            f"MIG group {group.group} is infeasible: {slices} compute slices, but the GPU has {catalog.full_slices}"
        )
    placements = place([p for _, _, p in positions])
    if placements is None:
        raise MigConfigError(
            f"MIG group {group.group} is infeasible: its instances cannot be placed without overlapping memory slices"
        )
    return GroupPlan(
        group.group,
        tuple(
            PlannedInstance(k, name, memory, profile, placements[k])
            for k, ((name, memory, profile)) in enumerate(positions)
        ),
    )


def describe(plan: GroupPlan) -> str:
    """``0: 2g.20gb@0:2, 1: 2g.20gb@2:2, …`` (the docs/mig.md §6 table notation)."""
    return ", ".join(f"{i.position}: {i.name}@{i.placement.start}:{i.placement.size}" for i in plan.instances)
