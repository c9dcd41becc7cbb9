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


def _a100_shaped(
    models: tuple[str, ...], n1: str, m1: int, n2: str, m2: int, n3: str, m3: int, n7: str, m7: int
) -> MigGeometryEntry:
    """The four layouts upstream ships for A100, for a model with the A100-shaped profile table."""
    return MigGeometryEntry(
        models=models,
        groups=(
            _group("group1", (n1, m1, 7)),
            _group("group2", (n2, m2, 3), (n1, m1, 1)),
            _group("group3", (n3, m3, 2)),
            _group("group4", (n7, m7, 1)),
        ),
    )


NEWER_MIG_GEOMETRIES: tuple[MigGeometryEntry, ...] = (
    # docs/mig.md §2.2.  Order matters (first entry with a matching model wins): "H200" before
    # "H20", "GB200" before "B200".  H100 values are NVML's; the others are the nominal sizes of
    # docs/mig.md §3 -- check a node's with `vgpu mig geometries` (docs/mig.md §2.3) first.
    _a100_shaped(("H100 80GB HBM3",), "1g.10gb", 9984, "2g.20gb", 20096, "3g.40gb", 40448, "7g.80gb", 81152),
    _a100_shaped(("H200",), "1g.18gb", 18432, "2g.35gb", 35840, "3g.71gb", 72704, "7g.141gb", 144384),
    _a100_shaped(("NVIDIA H20",), "1g.12gb", 12032, "2g.24gb", 24064, "3g.48gb", 48128, "7g.96gb", 96256),
    _a100_shaped(("GB200",), "1g.23gb", 23552, "2g.47gb", 47104, "3g.93gb", 94208, "7g.186gb", 188416),
    _a100_shaped(("B200",), "1g.23gb", 22784, "2g.45gb", 45568, "3g.90gb", 91136, "7g.180gb", 182272),
)
"""Shipped entries for the MIG-capable GPUs upstream's list lacks (the `mig` overlay's additions).

Not part of the built-in default: that stays upstream's list, so that a plugin without a
``device-config.yaml`` agrees with a Volcano scheduler running upstream's shipped ConfigMap."""

SHIPPED_MIG_GEOMETRIES: tuple[MigGeometryEntry, ...] = DEFAULT_KNOWN_MIG_GEOMETRIES + NEWER_MIG_GEOMETRIES
"""Upstream's list followed by :data:`NEWER_MIG_GEOMETRIES`: every model with a shipped geometry."""


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
