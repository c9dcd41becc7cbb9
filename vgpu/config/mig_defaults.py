"""The upstream shipped `knownMigGeometries` list (docs/mig.md §2.1).

It is the built-in default when `device-config.yaml` is absent or omits the key, so that the
plugin and a Volcano scheduler running with the shipped ConfigMap agree on every group and
position without any configuration.  The A30 and A100-40GB memory values are upstream's (larger
than NVML's real instance sizes); the MIG startup check warns about them (docs/mig.md §5.1).
"""

from __future__ import annotations

from typing import Any

from vgpu.config.model import MigGeometryEntry, MigGroup, MigTemplate


def _group(name: str, *templates: tuple[str, int, int]) -> MigGroup:
    return MigGroup(name, tuple(MigTemplate(n, memory, count) for n, memory, count in templates))


DEFAULT_KNOWN_MIG_GEOMETRIES: tuple[MigGeometryEntry, ...] = (
    MigGeometryEntry(
        models=("A30",),
        groups=(
            _group("group1", ("1g.6gb", 6144, 4)),
            _group("group2", ("2g.12gb", 12288, 2)),
            _group("group3", ("4g.24gb", 24576, 1)),
        ),
    ),
    MigGeometryEntry(
        models=("A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"),
        groups=(
            _group("group1", ("1g.5gb", 5120, 7)),
            _group("group2", ("2g.10gb", 10240, 3), ("1g.5gb", 5120, 1)),
            _group("group3", ("3g.20gb", 20480, 2)),
            _group("group4", ("7g.40gb", 40960, 1)),
        ),
    ),
    MigGeometryEntry(
        models=("A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"),
        groups=(
            _group("group1", ("1g.10gb", 9728, 7)),
            _group("group2", ("2g.20gb", 19968, 3), ("1g.10gb", 9728, 1)),
            _group("group3", ("3g.40gb", 40192, 2)),
            _group("group4", ("7g.80gb", 80896, 1)),
        ),
    ),
)


def geometries_as_data(entries: tuple[MigGeometryEntry, ...] = DEFAULT_KNOWN_MIG_GEOMETRIES) -> list[dict[str, Any]]:
    """The entries in `device-config.yaml` form (for writing a ConfigMap, the demo, the emulator)."""
    return [
        {
            "models": list(entry.models),
            "allowedGeometries": [
                {
                    "group": group.group,
                    "geometries": [
                        {"name": t.name, "memory": t.memory_mib, "count": t.count} for t in group.geometries
                    ],
                }
                for group in entry.groups
            ],
        }
        for entry in entries
    ]
