"""``PythonRegion``: the pure-Python reader behind the Region API gives the same snapshots and errors.

It exists so the region benchmark can slow the hot path on purpose and a test can watch the
gate fail (``VGPU_BENCH_REGION_READER=python``, tests/integration/bench).  That proof is only
honest if it computes exactly what the native reader computes, so every field is compared (all
but ``preads`` and ``bytes_read``, which describe the cost) on the writer-made layouts, the
real HAMi-core files and a thousand seeded mutations of them.
"""

from __future__ import annotations

import random

import pytest

from tests.unit.hamicore import scenario
from tests.unit.hamicore.test_region_fuzz import KNOWN_SIZES, Subject, _interesting, _rand_value
from vgpu.hamicore import layouts
from vgpu.hamicore.region import Region, RegionError, RegionSnapshot
from vgpu.sim.hamicore.python_region import PythonRegion

N_MUTATIONS = 1000


def _read(path, reader: type[Region]) -> RegionSnapshot | str:
    """A snapshot, or the error code's name."""
    try:
        with reader.open(path) as region:
            return region.read()
    except RegionError as exc:
        assert str(exc).startswith(f"{path}: ") and exc.detail
        return exc.code.name


def _cost_free(result):
    return result._replace(preads=0, bytes_read=0) if isinstance(result, RegionSnapshot) else result


def assert_same_result(path) -> RegionSnapshot | str:
    native = _read(path, Region)
    python = _read(path, PythonRegion)
    assert _cost_free(python) == _cost_free(native)
    if isinstance(python, RegionSnapshot):
        assert (python.preads, python.bytes_read) == (1, python.file_size)
    return python


@pytest.fixture(scope="module")
def subjects(tmp_path_factory) -> list[Subject]:
    base = tmp_path_factory.mktemp("pyreader")
    out = [
        Subject(base / f"{v}.cache", scenario.standard_region(base / f"{v}.src", v).read_bytes(), v)
        for v in scenario.VARIANTS
    ]
    out += [
        Subject(base / f"real-{name}.cache", path.read_bytes(), name)
        for name, path in scenario.fixture_paths(base).items()
    ]
    return out


def test_same_snapshots_on_every_layout_and_real_file(subjects):
    assert len(subjects) == len(scenario.VARIANTS) + 3
    assert sum(1 for s in subjects if s.expected["devices"]) >= len(scenario.VARIANTS) + 2
    for s in subjects:
        snap = assert_same_result(s.path)
        assert isinstance(snap, RegionSnapshot), s.label
        if s.label in scenario.VARIANTS:
            assert [d.as_dict() for d in snap.devices] == [
                dict(d, sm_util=d["sm_util"] if snap.has_util else 0) for d in scenario.STANDARD_EXPECTED["devices"]
            ]


def test_same_snapshots_and_errors_on_mutated_files(subjects):
    rng = random.Random(7001)
    outcomes: dict[str, int] = {}
    for _ in range(N_MUTATIONS):
        s = rng.choice(subjects)
        spec = layouts.spec_for_size(len(s.mirror))
        for _ in range(rng.randint(1, 4)):
            off, size = _interesting(rng, spec, s.expected["proc_num"])
            s.write(off, _rand_value(rng, size))
        if rng.random() < 0.05:
            s.resize(rng.choice([0, 4, len(s.original) - 1, len(s.original) + 1, rng.choice(KNOWN_SIZES)]))
        result = assert_same_result(s.path)
        key = "decoded" if isinstance(result, RegionSnapshot) else result
        if isinstance(result, RegionSnapshot) and result.anomalies:
            key = "decoded with anomalies"
        outcomes[key] = outcomes.get(key, 0) + 1
        s.restore()
    # Both readers must have been compared on clean decodes, on anomalies and on errors.
    assert outcomes.get("decoded", 0) > 100 and outcomes.get("decoded with anomalies", 0) > 20, outcomes
    assert {"MAGIC", "SIZE"} <= outcomes.keys(), outcomes
