"""discover_gpus() through nvidia-ml-py against the fake NVML, in child processes."""

from __future__ import annotations

import pytest

from vgpu.nvml import errors
from vgpu.sim.nvml import fakenvml

SETUP = "from vgpu.nvml.discovery import discover_gpus"


def three_gpus() -> list[dict]:
    return [
        fakenvml.device(0),
        fakenvml.device(
            1,
            name="NVIDIA H100 80GB HBM3",
            memory_total_mib=81559,
            numa_node=1,
            compute_capability=[9, 0],
            mig_mode=True,
            pci_bus_id="00000000:C1:00.0",
            minor=5,
        ),
        fakenvml.device(
            2, name="Tesla T4", memory_total_mib=15360, compute_capability=[7, 5], mig_capable=False, numa_node=0
        ),
    ]


def test_every_field_in_host_index_order(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, three_gpus())
    child = nvml_child(fake, SETUP)
    gpus = child.eval("discover_gpus()")
    cfg = fake.config["devices"]
    assert [g["index"] for g in gpus] == [0, 1, 2]
    for gpu, dev in zip(gpus, cfg, strict=True):
        assert gpu["uuid"] == dev["uuid"]
        assert gpu["name"] == dev["name"]
        assert gpu["memory_total_mib"] == dev["memory_total_mib"]
        assert gpu["minor"] == dev["minor"]
        assert gpu["pci_bus_id"] == dev["pci_bus_id"]
        assert gpu["numa_node"] == dev["numa_node"]
        assert gpu["compute_capability"] == dev["compute_capability"]
        assert gpu["mig_capable"] == dev["mig_capable"]
        assert gpu["mig_mode"] == dev["mig_mode"]
    assert gpus[1]["minor"] == 5 and gpus[1]["pci_bus_id"] == "00000000:C1:00.0"
    assert (gpus[2]["mig_capable"], gpus[2]["mig_mode"]) == (False, False)


def test_discovery_pairs_init_with_shutdown(tmp_path, nvml_child):
    """Repeated discovery in one process works (NVML init is reference-counted)."""
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    first = child.eval("discover_gpus()")
    assert child.eval("discover_gpus()") == first
    # NVML is not left initialised: a call without init fails with UNINITIALIZED.
    child.run("import pynvml")
    with pytest.raises(nvml_child.Error) as info:
        child.eval("pynvml.nvmlDeviceGetCount()")
    assert info.value.kind == "NVMLError_Uninitialized"


def test_numa_node_unsupported_is_none(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, numa_node=None)])
    child = nvml_child(fake, SETUP)
    # An empty sysfs: the fallback finds nothing either.
    (tmp_path / "sys").mkdir()
    gpus = child.eval(f"discover_gpus(sysfs_root={str(tmp_path / 'sys')!r})")
    assert gpus[0]["numa_node"] is None


def test_mig_mode_set_by_another_process_is_discovered(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    assert child.eval("discover_gpus()[0].mig_mode") is False
    other = nvml_child(fake, "from vgpu.nvml.mig_calls import MigNvml\nm = MigNvml()")
    assert other.eval("m.set_mig_mode(m.device(0), 1)") == 0
    assert child.eval("discover_gpus()[0].mig_mode") is True


def test_library_flag_beats_env(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP, VGPU_NVML_LIBRARY=str(tmp_path / "missing.so"))
    with pytest.raises(nvml_child.Error):
        child.eval("discover_gpus()")  # env var points nowhere
    gpus = child.eval(f"discover_gpus({str(fake.library)!r})")
    assert gpus[0]["uuid"] == fake.config["devices"][0]["uuid"]


def test_bad_library_path_names_library_and_error(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    bad = tmp_path / "no" / "libnvidia-ml.so.1"
    child = nvml_child(fake, SETUP)
    with pytest.raises(nvml_child.Error) as info:
        child.eval(f"discover_gpus({str(bad)!r})")
    assert info.value.kind == "NvmlLibraryError"
    assert info.value.code == errors.NVML_ERROR_LIBRARY_NOT_FOUND
    assert str(bad) in info.value.message
    assert "No such file" in info.value.message


def test_malformed_config_fails_init_with_library_named(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    fake.config_path.write_text("{not json")
    child = nvml_child(fake, SETUP)
    with pytest.raises(nvml_child.Error) as info:
        child.eval("discover_gpus()")
    assert info.value.kind == "NvmlError"
    assert info.value.code not in (None, 0)
    assert str(fake.library) in info.value.message
    assert "nvmlInit" in info.value.message
    stderr = child.close()
    assert str(fake.config_path) in stderr  # the fake names the file


def test_numa_node_falls_back_to_sysfs_when_nvml_cannot_tell(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(
        tmp_path,
        [
            fakenvml.device(
                0, pci_bus_id="00000000:3B:00.0", errors={"nvmlDeviceGetNumaNodeId": errors.NVML_ERROR_NOT_SUPPORTED}
            )
        ],
    )
    sysfs = tmp_path / "sys"
    node_file = sysfs / "bus/pci/devices/0000:3b:00.0/numa_node"
    node_file.parent.mkdir(parents=True)
    node_file.write_text("1\n")
    child = nvml_child(fake, SETUP)
    assert child.eval(f"discover_gpus(sysfs_root={str(sysfs)!r})[0].numa_node") == 1


def test_failing_device_call_names_call_device_and_library(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(
        tmp_path,
        [fakenvml.device(0), fakenvml.device(1, errors={"nvmlDeviceGetMinorNumber": errors.NVML_ERROR_GPU_IS_LOST})],
    )
    child = nvml_child(fake, SETUP)
    with pytest.raises(nvml_child.Error) as info:
        child.eval("discover_gpus()")
    assert info.value.code == errors.NVML_ERROR_GPU_IS_LOST
    assert "nvmlDeviceGetMinorNumber(device 1)" in info.value.message
    assert str(fake.library) in info.value.message
    # and NVML was shut down despite the failure
    child.run("import pynvml")
    with pytest.raises(nvml_child.Error):
        child.eval("pynvml.nvmlDeviceGetCount()")
