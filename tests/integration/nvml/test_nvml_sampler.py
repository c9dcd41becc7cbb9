"""Sampler (cffi native layer) against the fake NVML, in child processes."""

from __future__ import annotations

import time

from vgpu.nvml import errors
from vgpu.sim.nvml import fakenvml

MIB = 1024 * 1024
SETUP = "from vgpu.nvml.sampler import Sampler\ns = Sampler(max_processes={max_processes})"


def procs(base: int, n: int, *, mem: int = 100, sm: int = 10) -> list[dict]:
    return [{"pid": base + k, "used_memory_mib": mem + k, "sm_util": (sm + k) % 101} for k in range(n)]


def test_values_equal_the_configured_ones(tmp_path, nvml_child):
    devices = [
        fakenvml.device(0, memory_used_mib=1234, utilization_gpu=37, utilization_memory=12, processes=procs(4000, 3)),
        fakenvml.device(
            1, memory_total_mib=40960, memory_used_mib=0, utilization_gpu=0, utilization_memory=0, processes=[]
        ),
        fakenvml.device(
            2,
            memory_used_mib=80000,
            utilization_gpu=100,
            utilization_memory=99,
            processes=procs(5000, 2, mem=30000, sm=90),
        ),
    ]
    fake = fakenvml.FakeNvml.create(tmp_path, devices)
    child = nvml_child(fake, SETUP.format(max_processes=16))
    node = child.eval("s.sample()")
    assert len(node["devices"]) == 3
    for dev, cfg in zip(node["devices"], devices, strict=True):
        assert dev["memory_rc"] == 0 and dev["utilization_rc"] == 0 and dev["processes_rc"] == 0
        assert dev["memory_total_bytes"] == cfg["memory_total_mib"] * MIB
        assert dev["memory_used_bytes"] == cfg["memory_used_mib"] * MIB
        assert dev["memory_free_bytes"] == (cfg["memory_total_mib"] - cfg["memory_used_mib"]) * MIB
        assert dev["utilization_gpu"] == cfg["utilization_gpu"]
        assert dev["utilization_memory"] == cfg["utilization_memory"]
        assert dev["process_total"] == len(cfg["processes"])
        assert dev["processes_truncated"] is False
        got = [(p["pid"], p["used_memory_bytes"], p["sm_util"], p["gpu_instance_id"]) for p in dev["processes"]]
        want = [(p["pid"], p["used_memory_mib"] * MIB, p["sm_util"], None) for p in cfg["processes"]]
        assert got == want


def wait_for(child, expr: str, predicate, timeout: float = 10.0):
    """Evaluate ``expr`` in the child until ``predicate(value)``; polls with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = child.eval(expr)
        if predicate(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{expr} never satisfied the condition; last value {value}")


def test_a_running_sampler_follows_config_changes(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(
        tmp_path, [fakenvml.device(0, memory_used_mib=100, utilization_gpu=5, processes=procs(7000, 1))]
    )
    child = nvml_child(fake, SETUP.format(max_processes=16))
    first = child.eval("s.sample()")["devices"][0]
    assert first["memory_used_bytes"] == 100 * MIB and [p["pid"] for p in first["processes"]] == [7000]

    fake.update_device(
        0, memory_used_mib=2048, utilization_gpu=77, utilization_memory=33, processes=procs(8000, 4, sm=50)
    )
    dev = wait_for(child, "s.sample().devices[0]", lambda d: d["memory_used_bytes"] == 2048 * MIB)
    assert (dev["utilization_gpu"], dev["utilization_memory"]) == (77, 33)
    assert [p["pid"] for p in dev["processes"]] == [8000, 8001, 8002, 8003]
    assert [p["used_memory_bytes"] for p in dev["processes"]] == [(100 + k) * MIB for k in range(4)]


def test_per_process_sm_utilisation_follows_changes(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(
        tmp_path, [fakenvml.device(0, processes=[{"pid": 11, "used_memory_mib": 1, "sm_util": 20}])]
    )
    child = nvml_child(fake, SETUP.format(max_processes=4))
    assert child.eval("s.sample().devices[0].processes[0].sm_util") == 20
    fake.update_device(0, processes=[{"pid": 11, "used_memory_mib": 1, "sm_util": 85}])
    wait_for(child, "s.sample().devices[0].processes[0].sm_util", lambda v: v == 85)


def test_processes_are_truncated_to_the_bound_with_the_full_count(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(
        tmp_path, [fakenvml.device(0, processes=procs(100, 5)), fakenvml.device(1, processes=procs(200, 2))]
    )
    child = nvml_child(fake, SETUP.format(max_processes=2))
    d0, d1 = child.eval("s.sample()")["devices"]
    assert d0["processes_truncated"] is True and d0["process_total"] == 5
    assert [p["pid"] for p in d0["processes"]] == [100, 101]
    # per-process utilisation still lands on the kept rows
    assert [p["sm_util"] for p in d0["processes"]] == [10, 11]
    assert d1["processes_truncated"] is False and [p["pid"] for p in d1["processes"]] == [200, 201]


def test_more_processes_than_the_initial_scratch_buffer(tmp_path, nvml_child):
    """NVML answers INSUFFICIENT_SIZE; the layer grows its scratch buffer and asks again."""
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, processes=procs(1000, 150))])
    wide = nvml_child(fake, SETUP.format(max_processes=200))
    dev = wide.eval("s.sample().devices[0]")
    assert dev["processes_truncated"] is False and dev["process_total"] == 150
    assert [p["pid"] for p in dev["processes"]] == list(range(1000, 1150))
    narrow = nvml_child(fake, SETUP.format(max_processes=16))
    dev = narrow.eval("s.sample().devices[0]")
    assert dev["processes_truncated"] is True and dev["process_total"] == 150
    assert len(dev["processes"]) == 16


def test_mig_enabled_gpu_reports_utilization_not_supported(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(
        tmp_path, [fakenvml.device(0, mig_mode=True, memory_used_mib=10), fakenvml.device(1, utilization_gpu=3)]
    )
    child = nvml_child(fake, SETUP.format(max_processes=4))
    mig, plain = child.eval("s.sample()")["devices"]
    assert mig["utilization_rc"] == errors.NVML_ERROR_NOT_SUPPORTED
    assert mig["utilization_gpu"] is None and mig["utilization_memory"] is None
    assert mig["memory_rc"] == 0 and mig["memory_used_bytes"] == 10 * MIB  # other families unaffected
    assert plain["utilization_rc"] == 0 and plain["utilization_gpu"] == 3


def test_zero_copy_view_matches_the_dataclasses(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(
        tmp_path,
        [
            fakenvml.device(0, memory_used_mib=7, processes=procs(300, 3)),
            fakenvml.device(1, memory_used_mib=9, processes=procs(400, 1)),
        ],
    )
    child = nvml_child(fake, SETUP.format(max_processes=4))
    n = child.eval("s.sample_into()")
    assert n == 2
    view = child.eval(
        "[(s.devices[i].memory_used, s.devices[i].process_count, "
        "[s.processes[i * s.processes_per_device + k].pid for k in range(s.devices[i].process_count)])"
        " for i in range(2)]"
    )
    assert view == [[7 * MIB, 3, [300, 301, 302]], [9 * MIB, 1, [400]]]


def test_sampler_context_keeps_nvml_initialised_until_closed(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP.format(max_processes=4))
    assert child.eval("s.native.device_count()") == 1
    assert child.eval("s.native.missing_symbols") == []
    child.run("s.close()")
    assert child.eval("s.native.closed") is True


def test_nvml_errors_are_kept_per_device_and_family(tmp_path, nvml_child):
    broken = fakenvml.device(
        0,
        processes=procs(10, 2),
        errors={
            "nvmlDeviceGetMemoryInfo": errors.NVML_ERROR_GPU_IS_LOST,
            "nvmlDeviceGetComputeRunningProcesses": errors.NVML_ERROR_NO_PERMISSION,
            "nvmlDeviceGetProcessUtilization": errors.NVML_ERROR_UNKNOWN,
        },
    )
    healthy = fakenvml.device(1, memory_used_mib=5, utilization_gpu=9, processes=procs(20, 1))
    fake = fakenvml.FakeNvml.create(tmp_path, [broken, healthy])
    child = nvml_child(fake, SETUP.format(max_processes=4))
    bad, good = child.eval("s.sample()")["devices"]
    assert bad["memory_rc"] == errors.NVML_ERROR_GPU_IS_LOST and bad["memory_used_bytes"] is None
    assert bad["utilization_rc"] == 0  # not injected: still answered
    assert bad["processes_rc"] == errors.NVML_ERROR_NO_PERMISSION and bad["processes"] == []
    assert bad["process_util_rc"] == errors.NVML_ERROR_UNKNOWN
    assert good["memory_rc"] == 0 and good["memory_used_bytes"] == 5 * MIB
    assert good["utilization_gpu"] == 9 and [p["pid"] for p in good["processes"]] == [20]


def test_idle_gpu_has_no_utilisation_samples(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, processes=[])])
    child = nvml_child(fake, SETUP.format(max_processes=4))
    dev = child.eval("s.sample().devices[0]")
    assert dev["processes_rc"] == 0 and dev["processes"] == [] and dev["process_total"] == 0
    assert dev["process_util_rc"] == errors.NVML_ERROR_NOT_FOUND  # NVML: nothing newer than last seen


def test_process_on_a_mig_instance_carries_its_ids(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(
        fake,
        SETUP.format(max_processes=4)
        + """
from vgpu.nvml.mig_calls import MigNvml, Placement
m = MigNvml()
d = m.device(0)
m.set_mig_mode(d, 1)
gi = m.create_gpu_instance(d, m.gpu_instance_profile_info(d, 0).id, Placement(3, 1))
ci = m.create_compute_instance(gi, m.compute_instance_profile_info(gi, 0).id)
""",
    )
    gi_id, ci_id = child.eval("(m.gpu_instance_info(gi).id, m.compute_instance_info(ci).id)")
    fake.update_device(
        0,
        processes=[
            {"pid": 77, "used_memory_mib": 64, "sm_util": 0, "gpu_instance_id": gi_id, "compute_instance_id": ci_id}
        ],
    )
    dev = wait_for(child, "s.sample().devices[0]", lambda d: d["processes"] != [])
    proc = dev["processes"][0]
    assert (proc["pid"], proc["gpu_instance_id"], proc["compute_instance_id"]) == (77, gi_id, ci_id)
    assert dev["utilization_rc"] == errors.NVML_ERROR_NOT_SUPPORTED
    assert dev["process_util_rc"] == errors.NVML_ERROR_NOT_SUPPORTED
    assert proc["sm_util"] is None


def test_sampler_and_pynvml_discovery_share_one_library_in_a_process(tmp_path, nvml_child):
    """Discovery's nvmlInit/nvmlShutdown pair must not shut NVML down under the sampler."""
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, memory_used_mib=3)])
    child = nvml_child(fake, SETUP.format(max_processes=4) + "\nfrom vgpu.nvml.discovery import discover_gpus")
    assert child.eval("len(discover_gpus())") == 1
    assert child.eval("s.sample().devices[0].memory_used_bytes") == 3 * MIB
    child.run("s.close()")
    assert child.eval("discover_gpus()[0].uuid") == fake.config["devices"][0]["uuid"]


def test_refresh_picks_up_a_changed_device_list(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, memory_used_mib=1)])
    child = nvml_child(fake, SETUP.format(max_processes=4))
    assert len(child.eval("s.sample().devices")) == 1
    fake.config["devices"].append(fakenvml.device(1, memory_used_mib=2, processes=procs(50, 3)))
    fake.write()
    # The handle table is fixed until refresh(); the fake re-reads its file on the next call.
    wait_for(child, "s.native.refresh()", lambda n: n == 2)
    devices = child.eval("s.sample().devices")
    assert [d["memory_used_bytes"] for d in devices] == [1 * MIB, 2 * MIB]
    assert [p["pid"] for p in devices[1]["processes"]] == [50, 51, 52]
    assert child.eval("s.refresh()") == 2 and child.eval("s.capacity") == 2
    assert child.eval("s.sample_into()") == 2
