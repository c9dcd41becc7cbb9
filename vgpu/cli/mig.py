"""`vgpu mig geometries`: `knownMigGeometries` entries from this node's GPUs (docs/mig.md §2.3).

Read-only: it asks NVML for each MIG-capable GPU's profile table and never changes MIG mode or
creates an instance.  NVML reports the table only while MIG mode is on; a GPU with MIG mode off is
named on stderr with what to do.  The entries go to stdout as a `device-config.yaml` document (or
JSON with ``--json``), ready for both the plugin's ConfigMap and the Volcano scheduler's.
"""

from __future__ import annotations

import argparse
import json
import sys

from vgpu.config.mig_defaults import geometries_as_data
from vgpu.config.model import MigGeometryEntry
from vgpu.mig.errors import MigError
from vgpu.mig.geometries import ModelTable, entries_for, unmatched
from vgpu.mig.profiles import resolve_catalog
from vgpu.nvml.discovery import discover_gpus
from vgpu.nvml.errors import NvmlError
from vgpu.nvml.mig_calls import MigNvml

EXIT_NONE = 1  # no GPU gave an entry (or NVML failed)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = "Dynamic MIG helpers (read-only)."
    sub = parser.add_subparsers(dest="mig_command", metavar="ACTION")
    geo = sub.add_parser(
        "geometries",
        help="print knownMigGeometries entries built from this node's GPUs' MIG profile tables",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    geo.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    geo.add_argument(
        "--nvml-library",
        metavar="PATH",
        default=None,
        help="libnvidia-ml.so.1 to use (default: $VGPU_NVML_LIBRARY, else the system's)",
    )
    geo.set_defaults(func=run_geometries)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=usage)


def read_tables(library: str | None) -> tuple[list[ModelTable], list[str], list[str]]:
    """(tables of the MIG-capable GPUs, every GPU name, notes for stderr).  Raises NvmlError."""
    gpus = discover_gpus(library)
    tables: list[ModelTable] = []
    notes: list[str] = []
    with MigNvml(library) as nvml:
        for g in gpus:
            where = f"GPU {g.index} ({g.name}, {g.uuid})"
            if not g.mig_capable:
                notes.append(f"{where}: not MIG-capable; skipped")
                continue
            try:
                catalog = resolve_catalog(nvml, nvml.device(g.index), g.name)
            except (NvmlError, MigError) as exc:
                notes.append(f"{where}: cannot read its MIG profiles: {exc}; skipped")
                continue
            if not catalog.profiles:
                hint = "" if g.mig_mode else f"; MIG mode is off: enable it (nvidia-smi -i {g.index} -mig 1) and rerun"
                notes.append(f"{where}: NVML reports no MIG profile{hint}")
                continue
            tables.append(ModelTable(g.name, catalog))
    return tables, [g.name for g in gpus], notes


def render_yaml(entries: tuple[MigGeometryEntry, ...]) -> str:
    """A `device-config.yaml` document with just these entries, in the layout of docs/mig.md §2."""
    lines = [
        "# knownMigGeometries read from this node's NVML (vgpu mig geometries).  Use the same entries",
        "# in the plugin's device-config.yaml and in the Volcano scheduler's device ConfigMap.",
        "nvidia:",
        "  knownMigGeometries:",
    ]
    for e in entries:
        lines.append(f"  - models: [{', '.join(json.dumps(m) for m in e.models)}]")
        lines.append("    allowedGeometries:")
        for g in e.groups:
            lines.append(f"    - group: {g.group}")
            lines.append("      geometries:")
            for t in g.geometries:
                lines.append(f"      - {{name: {t.name}, memory: {t.memory_mib}, count: {t.count}}}")
    return "\n".join(lines) + "\n"


def run_geometries(args: argparse.Namespace) -> int:
    try:
        tables, names, notes = read_tables(args.nvml_library)
    except NvmlError as exc:
        print(f"vgpu mig geometries: {exc}", file=sys.stderr)
        return EXIT_NONE
    entries = entries_for(tables)
    for name in unmatched(entries, names):
        notes.append(f"{name}: an earlier entry's model also matches it; reorder before use")
    for note in notes:
        print(f"vgpu mig geometries: {note}", file=sys.stderr)
    if not entries:
        print("vgpu mig geometries: no GPU of this node gave a MIG geometry", file=sys.stderr)
        return EXIT_NONE
    if args.json:
        print(json.dumps({"nvidia": {"knownMigGeometries": geometries_as_data(entries)}}, indent=2))
    else:
        sys.stdout.write(render_yaml(entries))
    return 0
