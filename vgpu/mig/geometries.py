"""`knownMigGeometries` entries from a GPU's own MIG profile table (docs/mig.md §2.3).

What `vgpu mig geometries` prints: for each GPU model of the node, the layouts upstream ships for
A100 and A30, built from the profiles NVML reports, with NVML's memory sizes.  Pure: it takes
:class:`vgpu.mig.profiles.ProfileCatalog` values and returns config model values; reading NVML is
the CLI's business (read-only).

The rule, per model (it reproduces upstream's shipped A30 and A100 entries from their tables):

1. Candidates: the plain profiles (no ``+me`` or other suffix); per compute-slice count the one
   with the most instances (``1g.10gb`` ×7 over ``1g.20gb`` ×4); a profile whose memory equals that
   of a candidate with fewer slices is left out (``4g.40gb`` next to ``3g.40gb``: the scheduler
   fits by memory, so it would add nothing).
2. One group per candidate, smallest first: as many instances as fit side by side in its
   placements, lowest start first; the memory slices left over are filled with the smallest
   candidate (``2g.20gb`` ×3 + ``1g.10gb`` ×1).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vgpu.config.model import MigGeometryEntry, MigGroup, MigTemplate
from vgpu.mig.profiles import ProfileCatalog, ProfileInfo

PLAIN_NAME = re.compile(r"^\d+g\.\d+gb$")
MODEL_PREFIX = "NVIDIA "


@dataclass(frozen=True)
class ModelTable:
    """One GPU model of the node and its profile table (the first GPU of that name read)."""

    name: str  # nvmlDeviceGetName
    catalog: ProfileCatalog


def candidates(catalog: ProfileCatalog) -> list[ProfileInfo]:
    """Rule 1: the profiles that get a group, by slice count."""
    best: dict[int, ProfileInfo] = {}
    for p in catalog.profiles:
        if not PLAIN_NAME.match(p.name) or p.slice_count <= 0 or p.memory_size_mb <= 0:
            continue
        cur = best.get(p.slice_count)
        if cur is None or (p.instance_count, -p.memory_size_mb) > (cur.instance_count, -cur.memory_size_mb):
            best[p.slice_count] = p
    out: list[ProfileInfo] = []
    for slices in sorted(best):
        p = best[slices]
        if any(q.memory_size_mb == p.memory_size_mb for q in out):
            continue
        out.append(p)
    return out


def _fit(profile: ProfileInfo, taken: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """Placements of up to ``limit`` more instances of ``profile`` beside ``taken``, lowest start first."""
    got: list[tuple[int, int]] = []
    for pl in sorted(profile.placements, key=lambda p: (p.start, p.size)):
        if len(got) >= limit:
            break
        span = (pl.start, pl.start + pl.size)
        if all(span[1] <= a or b <= span[0] for a, b in taken + got):
            got.append(span)
    return got


def groups_for(catalog: ProfileCatalog) -> tuple[MigGroup, ...]:
    """Rule 2: one full layout per candidate profile."""
    cands = candidates(catalog)
    if not cands:
        return ()
    filler = cands[0]
    groups: list[MigGroup] = []
    for p in cands:
        taken = _fit(p, [], p.instance_count)
        if not taken:
            continue
        templates = [MigTemplate(p.name, p.memory_size_mb, len(taken))]
        if p is not filler:
            extra = _fit(filler, taken, filler.instance_count)
            if extra:
                templates.append(MigTemplate(filler.name, filler.memory_size_mb, len(extra)))
        groups.append(MigGroup(f"group{len(groups) + 1}", tuple(templates)))
    return tuple(groups)


def model_string(gpu_name: str) -> str:
    """The ``models`` value for a GPU: its NVML name without ``NVIDIA `` (a substring of both the
    plugin's name and the scheduler's ``NVIDIA-<name>``)."""
    name = gpu_name.strip()
    return name[len(MODEL_PREFIX) :] if name.startswith(MODEL_PREFIX) else name


def entries_for(tables: Iterable[ModelTable]) -> tuple[MigGeometryEntry, ...]:
    """One entry per model, longer model strings first (no entry shadows a longer name: "H200 …"
    before "H20"), models with no usable profile left out."""
    out: list[MigGeometryEntry] = []
    seen: set[str] = set()
    for t in tables:
        model = model_string(t.name)
        if not model or model in seen:
            continue
        seen.add(model)
        groups = groups_for(t.catalog)
        if groups:
            out.append(MigGeometryEntry(models=(model,), groups=groups))
    return tuple(sorted(out, key=lambda e: (-len(e.models[0]), e.models[0])))


def unmatched(entries: Sequence[MigGeometryEntry], gpu_names: Iterable[str]) -> list[str]:
    """GPU names whose first matching entry is not their own (a check of the order)."""
    bad = []
    for name in gpu_names:
        first = next((e for e in entries if e.matches(name)), None)
        if first is not None and first.models[0] != model_string(name):
            bad.append(name)
    return bad
