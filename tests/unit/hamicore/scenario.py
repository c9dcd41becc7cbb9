"""Region files for tests: the real HAMi-core fixtures, and the native-vs-reference cross-check.

The standard writer-made scenario lives with the stand-ins (:mod:`vgpu.sim.hamicore.scenario`,
the benchmarks use it too); its names are importable from here as well.
"""

from __future__ import annotations

import gzip
import json
import pathlib

from vgpu.sim.hamicore.scenario import (  # noqa: F401 - the region tests use them from here
    ENV,
    GIB,
    MIB,
    NOW,
    STANDARD_EXPECTED,
    UUIDS,
    VARIANTS,
    standard_region,
    stuck_seqlock_region,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "hami-core"  # provenance: its README.md


def fixture_paths(dest: pathlib.Path) -> dict[str, pathlib.Path]:
    """The three real v1.2 files, decompressed into ``dest``: name (with .gz) -> path."""
    out = {}
    for gz in sorted(FIXTURES.glob("*.cache.gz")):
        path = dest / gz.name.removesuffix(".gz")
        path.write_bytes(gzip.decompress(gz.read_bytes()))
        out[gz.name] = path
    return out


def fixture_expected() -> dict:
    return json.loads((FIXTURES / "expected.json").read_text())


def assert_same(snap, ref: dict) -> None:
    """The native snapshot and the independent pure-Python decode agree on every value."""
    assert ref["error"] is None
    for key in (
        "layout",
        "major_version",
        "minor_version",
        "file_size",
        "device_num",
        "device_num_raw",
        "proc_num",
        "proc_num_raw",
        "live_procs",
        "skipped_slots",
        "utilization_switch",
        "recent_kernel",
        "priority",
        "last_kernel_time",
    ):
        assert getattr(snap, key) == ref[key], key
    assert snap.limits == tuple(ref["limits"]) and snap.sm_limits == tuple(ref["sm_limits"])
    assert [d.as_dict() for d in snap.devices] == ref["devices"]
    assert list(snap.invalid_uuid_devices) == ref["invalid_uuid_devices"]
