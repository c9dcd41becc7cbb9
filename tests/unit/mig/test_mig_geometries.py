"""vgpu.mig.geometries: the rule that turns a profile table into upstream-shaped layouts (docs/mig.md §2.3)."""

from __future__ import annotations

from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES
from vgpu.config.model import MigGeometryEntry, MigGroup, MigTemplate
from vgpu.mig.geometries import ModelTable, candidates, entries_for, groups_for, model_string, unmatched
from vgpu.mig.profiles import STATIC_TABLES, ProfileCatalog, ProfileInfo

SLICES = {0x0: 1, 0x7: 1, 0x9: 1, 0x1: 2, 0x2: 3, 0x3: 4, 0x4: 7, 0x8: 2}


def catalog(model: str) -> ProfileCatalog:
    return ProfileCatalog(
        tuple(
            ProfileInfo(
                sp.name, sp.constant, sp.constant + 100, SLICES[sp.constant], sp.instances, sp.memory_mib, sp.placements
            )
            for sp in STATIC_TABLES[model]
        )
    )


def test_a100_80gb_gives_upstreams_entry_exactly():
    shipped = next(e for e in DEFAULT_KNOWN_MIG_GEOMETRIES if "A100-SXM4-80GB" in e.models)
    assert groups_for(catalog("A100-80GB")) == shipped.groups
    assert [p.name for p in candidates(catalog("A100-80GB"))] == ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]


def test_a30_gives_upstreams_layouts_with_nvml_sizes():
    assert groups_for(catalog("A30-24GB")) == (
        MigGroup("group1", (MigTemplate("1g.6gb", 5836, 4),)),
        MigGroup("group2", (MigTemplate("2g.12gb", 11672, 2),)),
        MigGroup("group3", (MigTemplate("4g.24gb", 23344, 1),)),
    )


def test_entries_longest_model_first_and_nothing_usable_left_out():
    tables = [
        ModelTable("NVIDIA H20", catalog("H20-96GB")),
        ModelTable("NVIDIA H200 141GB HBM3e", catalog("H200-141GB")),
        ModelTable("NVIDIA H20", catalog("H20-96GB")),  # a second GPU of a model: one entry
        ModelTable("NVIDIA Weird", ProfileCatalog(())),
    ]
    entries = entries_for(tables)
    assert [e.models for e in entries] == [("H200 141GB HBM3e",), ("H20",)]
    assert unmatched(entries, ["NVIDIA H20", "NVIDIA H200 141GB HBM3e"]) == []
    shadowing = (MigGeometryEntry(("H20",), entries[1].groups), entries[0])
    assert unmatched(shadowing, ["NVIDIA H200 141GB HBM3e"]) == ["NVIDIA H200 141GB HBM3e"]
    assert model_string("NVIDIA B200") == "B200" and model_string(" GB10 ") == "GB10"
