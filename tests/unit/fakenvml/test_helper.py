"""vgpu.sim.nvml.fakenvml: the helper that writes the fake NVML's config (no library calls)."""

from __future__ import annotations

import json
import os

import pytest

from vgpu.sim.nvml import fakenvml


def test_device_defaults_are_a_realistic_a100():
    dev = fakenvml.device(3)
    assert dev["uuid"].startswith("GPU-") and dev["name"] == "NVIDIA A100-SXM4-80GB"
    assert dev["minor"] == 3 and dev["pci_bus_id"] == "00000000:0A:00.0"
    assert (dev["mig_capable"], dev["mig_mode"], dev["compute_capability"]) == (True, False, [8, 0])
    assert fakenvml.device(4)["uuid"] != dev["uuid"]


def test_device_capability_follows_the_model():
    assert fakenvml.device(0, name="Tesla T4")["mig_capable"] is False
    assert fakenvml.device(0, name="NVIDIA H100 80GB HBM3")["compute_capability"] == [9, 0]
    assert fakenvml.device(0, name="Tesla T4", mig_capable=True)["mig_capable"] is True  # explicit wins
    assert fakenvml.device(0, utilization_gpu=40, xid_events=[79])["xid_events"] == [79]


@pytest.mark.parametrize(
    "name, capable",
    [
        ("NVIDIA A30", True),
        ("NVIDIA RTX A3000 Laptop GPU", False),
        ("NVIDIA A100-SXM4-40GB", True),
        ("NVIDIA A100-PCIE-80GB", True),
        ("NVIDIA H100 80GB HBM3", True),
        ("NVIDIA H200 141GB HBM3e", True),
        ("NVIDIA H100 PCIe", False),
        ("Tesla V100-SXM2-32GB", False),
    ],
)
def test_has_mig_table(name, capable):
    assert fakenvml.has_mig_table(name) is capable


def test_create_and_mutators_rewrite_the_file_atomically(tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path / "n", [fakenvml.device(0)], driver_version="535.1")
    assert fake.state_path == fake.config_path.with_name("fakenvml.json.state")
    assert fake.env["FAKE_NVML_CONFIG"] == str(fake.config_path)
    assert fake.env["VGPU_NVML_LIBRARY"] == str(fake.library)

    def on_disk():
        return json.loads(fake.config_path.read_text())

    assert on_disk()["driver_version"] == "535.1"
    inode = os.stat(fake.config_path).st_ino
    fake.add_xid(0, 79)
    fake.add_xid(0, {"xid": 48, "gpu_instance_id": 1, "compute_instance_id": 0})
    fake.add_ecc_dbe(0)
    fake.add_ecc_dbe(0, 2)
    fake.update_device(0, memory_used_mib=5)
    fake.inject_error("nvmlEventSetWait", 999)
    fake.inject_error("nvmlDeviceGetUUID", 15, index=0)
    dev = on_disk()["devices"][0]
    assert dev["xid_events"] == [79, {"xid": 48, "gpu_instance_id": 1, "compute_instance_id": 0}]
    assert (dev["ecc_dbe_events"], dev["memory_used_mib"], dev["errors"]) == (3, 5, {"nvmlDeviceGetUUID": 15})
    assert on_disk()["errors"] == {"nvmlEventSetWait": 999}
    fake.clear_error("nvmlEventSetWait")
    fake.clear_error("nvmlDeviceGetUUID", index=0)
    assert on_disk()["errors"] == {} and on_disk()["devices"][0]["errors"] == {}
    assert os.stat(fake.config_path).st_ino != inode  # replaced, not rewritten in place
    assert [p.name for p in fake.config_path.parent.iterdir()] == ["fakenvml.json"]  # no temp files left


def test_read_state_before_any_mig_change(tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    assert fake.read_state() == {}


def test_library_path_override(monkeypatch, tmp_path):
    monkeypatch.setenv("VGPU_FAKE_NVML_LIBRARY", str(tmp_path / "lib.so"))
    assert fakenvml.library_path() == tmp_path / "lib.so"


def test_a_library_older_than_its_sources_counts_as_stale(monkeypatch, tmp_path):
    (tmp_path / "native" / "fakenvml").mkdir(parents=True)
    src = tmp_path / "native" / "fakenvml" / "core.c"
    src.write_text("int x;")
    lib = tmp_path / "lib.so"
    monkeypatch.setattr(fakenvml, "REPO_ROOT", tmp_path)
    assert fakenvml._sources_newer_than(lib)  # missing
    lib.write_text("")
    os.utime(src, ns=(1_000_000_000, 1_000_000_000))
    assert not fakenvml._sources_newer_than(lib)
    os.utime(src, ns=(lib.stat().st_mtime_ns + 10**9,) * 2)
    assert fakenvml._sources_newer_than(lib)
