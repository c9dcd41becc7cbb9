"""`vgpu mig geometries` as an operator runs it, against the fake NVML (docs/mig.md §2.3).

The real command in a child process reads each GPU's MIG profile table, read-only, and prints
`knownMigGeometries` that the config loader accepts; for the models with a shipped entry the
output is that entry (A30 with NVML's instance sizes instead of upstream's).
"""

from __future__ import annotations

import json
import subprocess
import sys

from vgpu.config.loader import parse_device_config
from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES, NEWER_MIG_GEOMETRIES
from vgpu.mig.geometries import model_string
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import subprocess_env

NAMES = [
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A30",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H200 141GB HBM3e",
    "NVIDIA H20",
    "NVIDIA B200",
    "NVIDIA GB200",
    "NVIDIA A10",
]
MEMORY = {"NVIDIA A30": 24576, "NVIDIA H200 141GB HBM3e": 143771, "NVIDIA H20": 97871, "NVIDIA B200": 183359}


def _node(tmp_path) -> fakenvml.FakeNvml:
    devices = [
        fakenvml.device(
            i, name=n, memory_total_mib=MEMORY.get(n, 189952 if "GB200" in n else 81920), mig_mode=n != "NVIDIA A10"
        )
        for i, n in enumerate(NAMES)
    ]
    return fakenvml.FakeNvml.create(tmp_path / "nvml", devices)


def _run(fake: fakenvml.FakeNvml, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vgpu", "mig", "geometries", *args],
        env=subprocess_env(fake.env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_output_is_accepted_by_the_config_loader_and_matches_the_shipped_entries(tmp_path):
    fake = _node(tmp_path)
    done = _run(fake)
    assert done.returncode == 0, done.stderr
    assert "GPU 7 (NVIDIA A10" in done.stderr and "not MIG-capable" in done.stderr
    config, warnings = parse_device_config(done.stdout, "vgpu mig geometries")
    assert warnings == []
    by_model = {e.models[0]: e for e in config.known_mig_geometries}
    assert set(by_model) == {model_string(n) for n in NAMES[:-1]}
    # Each GPU's first matching entry is its own (longer names first: "H200 …" before "H20").
    for name in NAMES[:-1]:
        assert next(e for e in config.known_mig_geometries if e.matches(name)).models == (model_string(name),)
    shipped = {e.models[0]: e for e in DEFAULT_KNOWN_MIG_GEOMETRIES + NEWER_MIG_GEOMETRIES}
    assert by_model["A100-SXM4-80GB"].groups == shipped["A100-SXM4-80GB"].groups  # upstream's, NVML values
    assert by_model["H100 80GB HBM3"].groups == shipped["H100 80GB HBM3"].groups
    assert by_model["H200 141GB HBM3e"].groups == shipped["H200"].groups
    assert by_model["H20"].groups == shipped["NVIDIA H20"].groups
    assert by_model["B200"].groups == shipped["B200"].groups
    assert by_model["GB200"].groups == shipped["GB200"].groups
    a30 = [[(t.name, t.count) for t in g.geometries] for g in by_model["A30"].groups]
    assert a30 == [[(t.name, t.count) for t in g.geometries] for g in shipped["A30"].groups]
    assert [t.memory_mib for g in by_model["A30"].groups for t in g.geometries] == [5836, 11672, 23344]
    # The same entries as JSON.
    as_json = _run(fake, "--json")
    assert as_json.returncode == 0, as_json.stderr
    config_json, _ = parse_device_config(as_json.stdout, "json")
    assert config_json.known_mig_geometries == config.known_mig_geometries
    assert list(json.loads(as_json.stdout)) == ["nvidia"]


def test_read_only_and_clear_when_nothing_is_mig_capable(tmp_path):
    fake = _node(tmp_path)
    assert _run(fake).returncode == 0
    assert fake.read_state() == {}  # no MIG mode change, no instance: the state file was never written
    plain = fakenvml.FakeNvml.create(tmp_path / "plain", [fakenvml.device(0, name="NVIDIA A10", mig_capable=False)])
    done = _run(plain)
    assert done.returncode == 1 and done.stdout == ""
    assert "no GPU of this node gave a MIG geometry" in done.stderr
    broken = fakenvml.FakeNvml.create(tmp_path / "broken", [fakenvml.device(0)])
    broken.inject_error("nvmlInit_v2", 999)
    done = _run(broken)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    assert "vgpu mig geometries: nvmlInit" in done.stderr
