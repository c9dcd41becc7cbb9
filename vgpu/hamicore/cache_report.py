"""``vgpu inspect cache PATH``: decode a HAMi-core shared-region file (layout, header, slots).

Uses the same safe reader as the monitor, so inspecting a hostile file cannot hang (FIFO),
follow a symlink or crash; a bad file is reported with its precise error and exit status 1.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from typing import TYPE_CHECKING, Any

from vgpu.cli.inspect import InspectForm

if TYPE_CHECKING:  # the native reader is imported when a form runs, not for `vgpu --help`
    from vgpu.hamicore.region import RegionSnapshot, SlotInfo

_MIB = 2**20
_STATUS = {0: "exited", 1: "running", 2: "suspended"}


def _mib(n: int) -> str:
    return f"{n / _MIB:.0f} MiB" if n % _MIB == 0 else f"{n} B"


def _when(ts: int | None) -> str:
    if ts is None:
        return "n/a (layout has none)"
    if ts == 0:
        return "0"
    try:
        return f"{ts} ({datetime.datetime.fromtimestamp(ts, datetime.UTC):%Y-%m-%dT%H:%M:%SZ})"
    except (OverflowError, OSError, ValueError):
        return str(ts)


def to_json(snap: RegionSnapshot, slots: list[SlotInfo]) -> dict[str, Any]:
    out = snap.as_dict()
    out["slots"] = [dataclasses.asdict(s) for s in slots]
    return out


def render_text(snap: RegionSnapshot, slots: list[SlotInfo]) -> str:
    lines = [
        f"file:        {snap.path}",
        f"layout:      {snap.layout_name}" + (f" (header {snap.version})" if snap.version else " (no version fields)")
        + f", {snap.file_size} bytes",
        f"devices:     device_num {snap.device_num_raw}" + (" (clamped to 16)" if snap.device_num_raw > 16 else ""),
        f"processes:   proc_num {snap.proc_num_raw}, {snap.live_procs} in use"
        + (", read under the seqlock" if snap.seqlocked else ""),
        f"feedback:    priority {snap.priority}, utilization_switch {snap.utilization_switch}, "
        f"recent_kernel {snap.recent_kernel}",
        f"last kernel: {_when(snap.last_kernel_time)}",
    ]
    shown = max(snap.device_num, 1)
    lines.append("limits:      " + ", ".join(
        f"[{d}] {_mib(snap.limits[d]) if snap.limits[d] else 'unlimited'} / SM {snap.sm_limits[d]}%"
        for d in range(shown)))
    for dev in snap.devices:
        lines.append(
            f"device {dev.index}:    {dev.uuid}  used {_mib(dev.used_bytes)} (context {_mib(dev.context_bytes)}, "
            f"data {_mib(dev.data_bytes)})  monitor {_mib(dev.monitor_used_bytes)}  "
            f"sm_util {dev.sm_util}%  procs {dev.procs}")
    for d in snap.invalid_uuid_devices:
        lines.append(f"device {d}:    <invalid uuid, skipped>")
    for s in slots:
        state = _STATUS.get(s.status, f"status {s.status}")
        head = f"slot {s.index:<4}    pid {s.pid} hostpid {s.hostpid} {state}" + ("" if s.in_use else " (not in use)")
        if s.seqlock:
            head += f" seq {s.seqlock}"
        if not s.consistent:
            lines.append(head + "  <seqlock did not settle; counters not read>")
            continue
        usage = "  ".join(f"d{d}: {_mib(u.total_bytes)}" + (f" sm {u.sm_util}%" if u.sm_util else "")
                          for d, u in enumerate(s.devices) if u.total_bytes or u.sm_util or u.monitor_used_bytes)
        lines.append(head + ("  " + usage if usage else ""))
    for a in snap.anomalies:
        lines.append(f"anomaly:     {a}")
    return "\n".join(lines)


def inspect_cache(path: str) -> tuple[RegionSnapshot, list[SlotInfo]]:
    """Decode ``path``: the snapshot and every slot of ``procs[0, proc_num)``.  Raises RegionError."""
    from vgpu.hamicore.region import Region

    with Region.open(path) as region:
        snap = region.read()
        return snap, region.slots(snap)


def run_cache(operands: list[str], args: argparse.Namespace) -> int:
    from vgpu.hamicore.region import RegionError

    path = operands[0]
    try:
        snap, slots = inspect_cache(path)
    except RegionError as exc:
        if args.json:
            print(json.dumps({"path": path, "error": {"code": exc.code.name, "message": str(exc)}}))
        print(f"vgpu inspect: {exc} [{exc.code.name}]", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(to_json(snap, slots), indent=1))
    else:
        print(render_text(snap, slots))
    return 0


FORMS = [InspectForm("cache", "cache PATH", "decode a HAMi-core shared-region file", 1, run_cache)]
