"""The report of ``vgpu inspect cache PATH``: a HAMi-core shared-region file decoded (layout, header, slots).

Uses the same safe reader as the monitor, so inspecting a hostile file cannot hang (FIFO),
follow a symlink or crash; a bad file raises `RegionError` with its precise code.  The command
line (:mod:`vgpu.cli.inspect`) renders the report as text or JSON.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vgpu.hamicore.region import Region, RegionSnapshot, SlotInfo


def inspect_cache(path: str) -> tuple[RegionSnapshot, list[SlotInfo]]:
    """Decode ``path``: the snapshot and every slot of ``procs[0, proc_num)``.  Raises RegionError."""
    with Region.open(path) as region:
        snap = region.read()
        return snap, region.slots(snap)


def report_dict(snap: RegionSnapshot, slots: list[SlotInfo]) -> dict[str, Any]:
    """The snapshot and its slots as plain data (what ``--json`` prints)."""
    out = snap.as_dict()
    out["slots"] = [dataclasses.asdict(s) for s in slots]
    return out
