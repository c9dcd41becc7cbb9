"""Config reloading and config errors (docs/testing.md §3.1 "Reloading", issue item 4)."""

from __future__ import annotations

import json
import os

import pynvml

from vgpu.sim.nvml import fakenvml

MIB = 1024 * 1024


def replace_text(path, text: str) -> None:
    """Atomically replace a file with arbitrary (possibly invalid) text."""
    tmp = path.with_name(path.name + ".tmp-test")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_a_running_process_sees_config_changes_at_its_next_call(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, memory_used_mib=100, utilization_gpu=5)])
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(0)")
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 100 * MIB
    for used in (2048, 3000, 3001):  # same size on disk each time: the inode tells them apart
        fake.update_device(
            0, memory_used_mib=used, utilization_gpu=77, processes=[{"pid": 9, "used_memory_mib": 1, "sm_util": 50}]
        )
        assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == used * MIB
    assert child.eval("p.nvmlDeviceGetUtilizationRates(h).gpu") == 77
    assert [x["pid"] for x in child.eval("p.nvmlDeviceGetComputeRunningProcesses(h)")] == [9]


def test_in_place_rewrite_is_noticed_too(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, memory_used_mib=100)])
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(0)")
    fake.config["devices"][0]["memory_used_mib"] = 12345
    fake.config_path.write_text(json.dumps(fake.config))  # not atomic: same inode, new size/mtime
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 12345 * MIB


def test_a_bad_reload_keeps_the_last_good_state_and_reports_once(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, memory_used_mib=100)])
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(0)")
    replace_text(fake.config_path, '{"devices": [')
    for _ in range(5):
        assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 100 * MIB
        assert child.eval("p.nvmlDeviceGetCount()") == 1
    errors = [line for line in child.stderr().splitlines() if line.startswith("fakenvml:")]
    assert len(errors) == 1, errors
    assert str(fake.config_path) in errors[0] and "keeping the last good configuration" in errors[0]
    assert "line 1, column 14" in errors[0]
    # An invalid (well-formed) file is reported the same way, once.
    bad = json.loads(json.dumps(fake.config))
    bad["devices"][0]["memory_used_mib"] = "lots"
    replace_text(fake.config_path, json.dumps(bad))
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 100 * MIB
    errors = [line for line in child.stderr().splitlines() if line.startswith("fakenvml:")]
    assert len(errors) == 2 and "devices[0].memory_used_mib: expected an integer" in errors[1]
    # A good file again takes effect.
    fake.update_device(0, memory_used_mib=200)
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 200 * MIB
    # A deleted config also keeps the last good state.
    fake.config_path.unlink()
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 200 * MIB


def test_device_list_changes_are_picked_up(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = pynvml_child(fake)
    assert child.eval("p.nvmlDeviceGetCount()") == 1
    fake.config["devices"].append(fakenvml.device(1))
    fake.write()
    assert child.eval("p.nvmlDeviceGetCount()") == 2
    fake.config["devices"].pop()
    fake.write()
    assert child.rc("p.nvmlDeviceGetHandleByIndex(1)") == pynvml.NVML_ERROR_INVALID_ARGUMENT


# ---------------------------------------------------------------- nvmlInit failures


def test_missing_config_variable(nvml_init, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    rc, err = nvml_init(fake, env={"FAKE_NVML_CONFIG": ""})
    assert rc == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    assert "FAKE_NVML_CONFIG is not set" in err


def test_missing_config_file(nvml_init, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    fake.config_path.unlink()
    rc, err = nvml_init(fake)
    assert rc == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    assert f"fakenvml: {fake.config_path}: cannot open: No such file or directory" in err


def malformed_cases() -> list[tuple[str, str]]:
    return [
        ("", "line 1, column 1: empty document"),
        ('{"devices": [}', "line 1, column 14: unexpected character"),
        ('{"devices": []', "line 1, column 15: unexpected end of input in object"),
        ('{"devices": [],}', "line 1, column 16: expected a string key"),
        ('{"devices": []}\n{}', "line 2, column 1: unexpected data after the JSON value"),
        ('{"devices": [], "devices": []}', 'line 1, column 17: duplicate key "devices"'),
        ('{"driver_version": "5\x01"}', "control character in string"),
        ('{"devices": [01]}', "leading zero in number"),
        ("[" * 100, "nesting too deep"),
        ('{"driver_version": "\\ud800"}', "unpaired surrogate"),
    ]


def test_malformed_config_fails_init_naming_the_file_and_problem(nvml_init, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    for text, problem in malformed_cases():
        replace_text(fake.config_path, text)
        rc, err = nvml_init(fake)
        assert rc == pynvml.NVML_ERROR_UNKNOWN, text
        assert f"fakenvml: {fake.config_path}: " in err and problem in err, (text, err)


def invalid_cases() -> list[tuple[dict, str]]:
    dev = fakenvml.device(0)
    return [
        ({"devices": [dict(dev, colour="red")]}, 'devices[0]: unknown key "colour"'),
        ({"devices": [dev], "extra": 1}, 'top level: unknown key "extra"'),
        ({"driver_version": "1"}, 'top level: missing required key "devices"'),
        ({"devices": {}}, "devices: expected an array, got an object"),
        ({"devices": [{k: v for k, v in dev.items() if k != "uuid"}]}, 'devices[0]: missing required key "uuid"'),
        ({"devices": [dict(dev, uuid="8664316c")]}, 'devices[0].uuid: "8664316c" must start with "GPU-"'),
        ({"devices": [dict(dev, memory_total_mib=0)]}, "devices[0].memory_total_mib: 0 is out of range"),
        (
            {"devices": [dict(dev, memory_used_mib=1.5)]},
            "devices[0].memory_used_mib: expected an integer, got a non-integer number",
        ),
        ({"devices": [dict(dev, utilization_gpu=101)]}, "devices[0].utilization_gpu: 101 is out of range [0, 100]"),
        ({"devices": [dict(dev, mig_mode="yes")]}, "devices[0].mig_mode: expected a boolean"),
        ({"devices": [dict(dev, pci_bus_id="07:00.0")]}, 'devices[0].pci_bus_id: "07:00.0" is not of the form'),
        ({"devices": [dict(dev, compute_capability=[8])]}, "devices[0].compute_capability: expected [major, minor]"),
        ({"devices": [dict(dev, processes=[{"pid": 1, "sm": 3}])]}, 'devices[0].processes[0]: unknown key "sm"'),
        (
            {"devices": [dict(dev, processes=[{"used_memory_mib": 3}])]},
            'devices[0].processes[0]: missing required key "pid"',
        ),
        ({"devices": [dict(dev, processes=[{"pid": 1}, {"pid": 1}])]}, "devices[0].processes[1].pid: duplicate pid 1"),
        (
            {"devices": [dict(dev, processes=[{"pid": 1, "gpu_instance_id": 1}])]},
            "gpu_instance_id and compute_instance_id must be given together",
        ),
        ({"devices": [dict(dev, xid_events=["79"])]}, "devices[0].xid_events[0]: expected an integer XID or an object"),
        ({"devices": [dict(dev, xid_events=[{"xid": 79, "gi": 1}])]}, 'devices[0].xid_events[0]: unknown key "gi"'),
        ({"devices": [dict(dev, ecc_dbe_events=-1)]}, "devices[0].ecc_dbe_events: -1 is out of range"),
        ({"devices": [dev, dict(dev)]}, "devices[1].uuid: duplicate of devices[0].uuid"),
        (
            {"devices": [dict(dev, name="Tesla T4", mig_capable=True)]},
            'devices[0].mig_capable: true, but "Tesla T4" has no built-in MIG profile table',
        ),
        (
            {"devices": [dict(dev, name="Tesla T4", mig_capable=False, mig_mode=True)]},
            "devices[0].mig_mode: true on a device that is not MIG-capable",
        ),
        ({"devices": [dev], "errors": {"nvmlFrobnicate": 3}}, 'top level.errors: unknown key "nvmlFrobnicate"'),
        (
            {"devices": [dict(dev, errors={"nvmlDeviceGetUUID": 0})]},
            "devices[0].errors.nvmlDeviceGetUUID: 0 is out of range",
        ),
        ([], "the top level must be an object, got an array"),
    ]


def test_invalid_config_fails_init_naming_the_key(nvml_init, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    for config, problem in invalid_cases():
        replace_text(fake.config_path, json.dumps(config))
        rc, err = nvml_init(fake)
        assert rc == pynvml.NVML_ERROR_UNKNOWN, config
        assert f"fakenvml: {fake.config_path}: " in err and problem in err, (problem, err)


def test_minimal_config_gets_defaults(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [])
    fake.config = {"devices": [{"uuid": "GPU-1", "name": "NVIDIA A30", "memory_total_mib": 24576}]}
    fake.write()
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(0)")
    assert child.eval("p.nvmlSystemGetDriverVersion()") == "550.54.15"
    assert child.eval("p.nvmlSystemGetCudaDriverVersion()") == 12040
    assert child.eval("p.nvmlDeviceGetMinorNumber(h)") == 0
    assert child.eval("p.nvmlDeviceGetPciInfo(h).busId") == "00000000:07:00.0"
    assert child.rc("p.nvmlDeviceGetNumaNodeId(h)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.eval("p.nvmlDeviceGetMigMode(h)") == [0, 0]  # an A30 is MIG-capable by default
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 0


def test_symlinked_config_is_followed(pynvml_child, tmp_path):
    """ConfigMap-style links change behind the link; the library stats on every call then."""
    fake = fakenvml.FakeNvml.create(tmp_path / "data", [fakenvml.device(0, memory_used_mib=1)])
    link = tmp_path / "config.json"
    link.symlink_to(fake.config_path)
    child = pynvml_child(fake, env={"FAKE_NVML_CONFIG": str(link)})
    child.run("h = p.nvmlDeviceGetHandleByIndex(0)")
    fake.update_device(0, memory_used_mib=2)
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 2 * MIB


def test_forked_child_and_parent_both_follow_changes(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, memory_used_mib=1)])
    child = pynvml_child(fake)
    child.run(
        "import os\n"
        "h = p.nvmlDeviceGetHandleByIndex(0)\n"
        "r, w = os.pipe()\n"
        "go_r, go_w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.read(go_r, 1)\n"
        "    os.write(w, str(p.nvmlDeviceGetMemoryInfo(h).used).encode())\n"
        "    os._exit(0)\n"
    )
    fake.update_device(0, memory_used_mib=7)
    child.run("os.write(go_w, b'x')\nforked = int(os.read(r, 64))\nos.waitpid(pid, 0)")
    assert child.eval("forked") == 7 * MIB
    # The forked process must not have consumed the parent's change notification.
    assert child.eval("p.nvmlDeviceGetMemoryInfo(h).used") == 7 * MIB
