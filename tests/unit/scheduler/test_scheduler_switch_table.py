"""The per-version table of docs/scheduler-emulator.md §9.6 is the emulator's switches, cell by cell."""

from __future__ import annotations

import dataclasses
import pathlib
import re

from vgpu.sim.scheduler.versions import VERSIONS, VersionSwitches, switches_for

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "scheduler-emulator.md"


def table() -> dict[str, list[str]]:
    text = DOC.read_text()
    section = text[text.index("### 9.6") : text.index("### 9.7")]
    rows: dict[str, list[str]] = {}
    header: list[str] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            assert header[2:] == list(VERSIONS), header
            continue
        if set(cells[0]) <= set("-"):
            continue
        m = re.fullmatch(r"`(\w+)`", cells[1])
        assert m, f"row {cells[0]!r}: the second cell must name the switch in backticks"
        rows[m.group(1)] = cells[2:]
    return rows


def cell(value: object) -> str:
    if isinstance(value, bool):
        return "✓" if value else "—"
    return str(value)


def test_every_switch_has_one_row_and_every_row_a_switch():
    fields = [f.name for f in dataclasses.fields(VersionSwitches) if f.name != "name"]
    assert sorted(table()) == sorted(fields)


def test_cells_equal_the_switches():
    rows = table()
    for i, version in enumerate(VERSIONS):
        sw = switches_for(version)
        for name, cells in rows.items():
            assert cells[i] == cell(getattr(sw, name)), f"{name} in {version}"
