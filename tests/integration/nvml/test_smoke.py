"""The real-driver smoke test, run here against the fake NVML: its report, and that it only reads."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

from benchmarks import gpu_smoke
from tests.conftest import subprocess_env
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import REPO_ROOT


def test_smoke_report_against_the_fake_library(tmp_path):
    fake = fakenvml.FakeNvml.create(
        tmp_path / "nvml",
        [
            fakenvml.device(0, processes=[{"pid": 4242, "used_memory_mib": 1024, "sm_util": 30}]),
            fakenvml.device(1, name="NVIDIA A30", memory_total_mib=24576),
        ],
    )
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_smoke", "--json", "--rounds", "5"],
        env=subprocess_env(fake.env),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["driver_version"] == "550.54.15"
    assert [g["uuid"] for g in report["gpus"]] == [d["uuid"] for d in fake.config["devices"]]
    assert [s["memory_total_bytes"] for s in report["sample"]] == [81920 << 20, 24576 << 20]
    assert all(s["matches_pynvml_total"] for s in report["sample"])
    assert report["sample"][0]["processes"] == 1
    assert set(report["timing_us"]) >= {"cffi_sample_into", "pynvml", "ratio_sample_into"}
    a100 = report["mig"][fake.config["devices"][0]["uuid"]]
    assert a100["mig_mode"] == {"current": 0, "pending": 0}
    assert {p["name"] for p in a100["profiles"]} >= {"MIG 1g.10gb", "MIG 7g.80gb"}
    assert [p["placements"] for p in a100["profiles"] if p["name"] == "MIG 3g.40gb"] == [[[0, 4], [4, 4]]]
    # Read-only: MIG mode still off, and no MIG state was ever written.
    assert fake.read_state() == {}


def test_smoke_module_never_calls_a_mutating_nvml_operation():
    source = inspect.getsource(gpu_smoke)
    for call in (
        "set_mig_mode",
        "create_gpu_instance",
        "create_compute_instance",
        "destroy_gpu_instance",
        "destroy_compute_instance",
        "nvmlDeviceSetMigMode",
        "nvmlDeviceReset",
        "apply(",
    ):
        assert call not in source, call


def test_smoke_exits_1_naming_the_library_when_nvml_cannot_start(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_smoke", "--nvml-library", str(tmp_path / "nope.so")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert out.returncode == 1
    assert "nope.so" in out.stderr
