"""System and device queries of the fake NVML through nvidia-ml-py."""

from __future__ import annotations

import pynvml

from vgpu.sim.nvml import fakenvml

MIB = 1024 * 1024

# docs/testing.md §3.1 "Symbols" + the Foundation issue's list, spelled as pynvml resolves them.
SYMBOLS = [
    "nvmlInit",
    "nvmlInit_v2",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlSystemGetNVMLVersion",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetPciInfo_v2",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetNumaNodeId",
    "nvmlEventSetCreate",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlEventSetWait",
    "nvmlEventSetFree",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceSetMigMode",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstanceProfileInfoV",
    "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
    "nvmlDeviceCreateGpuInstance",
    "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlGpuInstanceDestroy",
    "nvmlDeviceGetGpuInstances",
    "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo",
    "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
    "nvmlGpuInstanceCreateComputeInstance",
    "nvmlComputeInstanceDestroy",
    "nvmlGpuInstanceGetComputeInstances",
    "nvmlGpuInstanceGetComputeInstanceById",
    "nvmlComputeInstanceGetInfo_v2",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
]


def two_gpus() -> list[dict]:
    return [
        fakenvml.device(
            0,
            memory_used_mib=1000,
            utilization_gpu=37,
            utilization_memory=12,
            processes=[
                {"pid": 4242, "used_memory_mib": 1024, "sm_util": 30, "mem_util": 7},
                {"pid": 4343, "used_memory_mib": 2048, "sm_util": 60},
            ],
        ),
        fakenvml.device(
            1, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, numa_node=1, pci_bus_id="00000000:C1:00.0", minor=5
        ),
    ]


def test_every_listed_symbol_is_exported(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = pynvml_child(fake, init=False)
    missing = child.eval(f"[s for s in {SYMBOLS!r} if not hasattr(ctypes.CDLL(LIB), s)]")
    assert missing == []


def test_system_queries(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus(), driver_version="535.104.05", cuda_driver_version=12020)
    child = pynvml_child(fake)
    assert child.eval("p.nvmlSystemGetDriverVersion()") == "535.104.05"
    assert child.eval("p.nvmlSystemGetNVMLVersion()") == "12.535.104.05"
    assert child.eval("p.nvmlSystemGetCudaDriverVersion()") == 12020
    assert child.eval("p.nvmlSystemGetCudaDriverVersion_v2()") == 12020
    assert child.eval("p.nvmlDeviceGetCount()") == 2
    assert child.eval("p.nvmlErrorString(p.NVML_ERROR_IN_USE)") == "In use by another client"


def test_init_variants_are_reference_counted(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = pynvml_child(fake, init=False)
    child.run("lib = ctypes.CDLL(LIB)")
    assert child.eval("lib.nvmlInit_v2()") == 0
    assert child.eval("lib.nvmlInitWithFlags(0)") == 0
    assert child.eval("lib.nvmlInit()") == 0
    for _ in range(3):
        assert child.eval("lib.nvmlShutdown()") == 0
    assert child.eval("lib.nvmlShutdown()") == pynvml.NVML_ERROR_UNINITIALIZED


def test_identity_queries(pynvml_child, tmp_path):
    devices = two_gpus()
    fake = fakenvml.FakeNvml.create(tmp_path, devices)
    child = pynvml_child(fake)
    for i, dev in enumerate(devices):
        child.run(f"h = p.nvmlDeviceGetHandleByIndex({i})")
        assert child.eval("p.nvmlDeviceGetUUID(h)") == dev["uuid"]
        assert child.eval("p.nvmlDeviceGetName(h)") == dev["name"]
        assert child.eval("p.nvmlDeviceGetMinorNumber(h)") == dev["minor"]
        assert child.eval("p.nvmlDeviceGetNumaNodeId(h)") == dev["numa_node"]
        assert child.eval("list(p.nvmlDeviceGetCudaComputeCapability(h))") == dev["compute_capability"]
        assert child.eval(f"addr(p.nvmlDeviceGetHandleByUUID({dev['uuid']!r})) == addr(h)") is True
        assert child.eval("p.nvmlDeviceGetIndex(h)") == i
    assert child.eval("list(p.nvmlDeviceGetCudaComputeCapability(p.nvmlDeviceGetHandleByIndex(1)))") == [9, 0]


def test_pci_info_v3_and_legacy_v2(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(1)")
    pci = child.eval("p.nvmlDeviceGetPciInfo(h)")
    assert pci["busId"] == "00000000:C1:00.0" and pci["busIdLegacy"] == "0000:C1:00.0"
    assert (pci["domain"], pci["bus"], pci["device"]) == (0, 0xC1, 0)
    assert pci["pciDeviceId"] == 0x233010DE  # H100 SXM5
    v2 = child.eval(
        "(lambda i: (p.nvmlLib.nvmlDeviceGetPciInfo_v2(h, ctypes.byref(i)), plain(i)))(p.nvmlPciInfo_v2_t())"
    )
    assert v2[0] == 0 and v2[1]["busId"] == "0000:C1:00.0" and v2[1]["bus"] == 0xC1
    assert child.eval("addr(p.nvmlDeviceGetHandleByPciBusId('00000000:C1:00.0')) == addr(h)") is True


def test_numa_node_absent_is_not_supported(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, numa_node=None)])
    child = pynvml_child(fake)
    assert child.rc("p.nvmlDeviceGetNumaNodeId(p.nvmlDeviceGetHandleByIndex(0))") == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_memory_v1_and_v2(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(0)")
    v1 = child.eval("p.nvmlDeviceGetMemoryInfo(h)")
    assert v1 == {"total": 81920 * MIB, "free": (81920 - 1000) * MIB, "used": 1000 * MIB}
    v2 = child.eval("p.nvmlDeviceGetMemoryInfo(h, version=p.nvmlMemory_v2)")
    assert v2 == {
        "version": 0x02000028,
        "total": 81920 * MIB,
        "reserved": 0,
        "free": (81920 - 1000) * MIB,
        "used": 1000 * MIB,
    }
    assert child.rc("p.nvmlDeviceGetMemoryInfo(h, version=0x01000028)") == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


def test_utilization_and_processes(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(0)")
    assert child.eval("p.nvmlDeviceGetUtilizationRates(h)") == {"gpu": 37, "memory": 12}
    procs = child.eval("p.nvmlDeviceGetComputeRunningProcesses(h)")
    assert procs == [
        {"pid": 4242, "usedGpuMemory": 1024 * MIB, "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF},
        {"pid": 4343, "usedGpuMemory": 2048 * MIB, "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF},
    ]
    assert child.eval("p.nvmlDeviceGetGraphicsRunningProcesses(h)") == []
    samples = child.eval("p.nvmlDeviceGetProcessUtilization(h, 0)")
    assert [(s["pid"], s["smUtil"], s["memUtil"], s["encUtil"], s["decUtil"]) for s in samples] == [
        (4242, 30, 7, 0, 0),
        (4343, 60, 0, 0, 0),
    ]
    now_us = child.eval("int(time.time() * 1e6)")
    assert all(abs(s["timeStamp"] - now_us) < 10_000_000 for s in samples)


def test_idle_gpu_has_no_processes_and_no_samples(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run("h = p.nvmlDeviceGetHandleByIndex(1)")
    assert child.eval("p.nvmlDeviceGetComputeRunningProcesses(h)") == []
    # NVML reports "no samples newer than lastSeenTimeStamp" as NOT_FOUND.
    assert child.rc("p.nvmlDeviceGetProcessUtilization(h, 0)") == pynvml.NVML_ERROR_NOT_FOUND
    child.run("h0 = p.nvmlDeviceGetHandleByIndex(0)")
    assert (
        child.rc("p.nvmlDeviceGetProcessUtilization(h0, int(time.time() * 1e6) + 10**9)") == pynvml.NVML_ERROR_NOT_FOUND
    )


def test_insufficient_size_reports_the_required_count(pynvml_child, tmp_path):
    procs = [{"pid": 100 + k, "used_memory_mib": k, "sm_util": k} for k in range(5)]
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, processes=procs)])
    child = pynvml_child(fake)
    child.run(
        "h = p.nvmlDeviceGetHandleByIndex(0)\n"
        "n = ctypes.c_uint(2)\n"
        "arr = (p.c_nvmlProcessInfo_v3_t * 2)()\n"
        "rc = p.nvmlLib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), arr)"
    )
    assert child.eval("(rc, n.value)") == [pynvml.NVML_ERROR_INSUFFICIENT_SIZE, 5]
    child.run("n = ctypes.c_uint(0)\nrc = p.nvmlLib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), None)")
    assert child.eval("(rc, n.value)") == [pynvml.NVML_ERROR_INSUFFICIENT_SIZE, 5]
    child.run(
        "n = ctypes.c_uint(1)\n"
        "s = (p.c_nvmlProcessUtilizationSample_t * 1)()\n"
        "rc = p.nvmlLib.nvmlDeviceGetProcessUtilization(h, s, ctypes.byref(n), ctypes.c_ulonglong(0))"
    )
    assert child.eval("(rc, n.value)") == [pynvml.NVML_ERROR_INSUFFICIENT_SIZE, 5]
    child.run(
        "n = ctypes.c_uint(5)\n"
        "arr = (p.c_nvmlProcessInfo_v3_t * 5)()\n"
        "rc = p.nvmlLib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), arr)"
    )
    assert child.eval("(rc, n.value, [arr[i].pid for i in range(5)])") == [0, 5, [100, 101, 102, 103, 104]]
    # The legacy v1 entry point writes the two-field layout.
    child.run(
        "n = ctypes.c_uint(5)\n"
        "class V1(ctypes.Structure):\n"
        "    _fields_ = [('pid', ctypes.c_uint), ('usedGpuMemory', ctypes.c_ulonglong)]\n"
        "arr1 = (V1 * 5)()\n"
        "rc = p.nvmlLib.nvmlDeviceGetComputeRunningProcesses(h, ctypes.byref(n), arr1)"
    )
    assert child.eval("(rc, [(a.pid, a.usedGpuMemory) for a in arr1])") == [0, [[100 + k, k * MIB] for k in range(5)]]
    # Strings too: a short buffer is INSUFFICIENT_SIZE.
    child.run("buf = ctypes.create_string_buffer(8)\nrc = p.nvmlLib.nvmlDeviceGetUUID(h, buf, 8)")
    assert child.eval("rc") == pynvml.NVML_ERROR_INSUFFICIENT_SIZE


def test_handles_and_indices_out_of_range(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    assert child.rc("p.nvmlDeviceGetHandleByIndex(2)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert (
        child.rc("p.nvmlDeviceGetHandleByUUID('GPU-00000000-0000-0000-0000-000000000000')")
        == pynvml.NVML_ERROR_NOT_FOUND
    )
    assert child.rc("p.nvmlDeviceGetHandleByPciBusId('00000000:99:00.0')") == pynvml.NVML_ERROR_NOT_FOUND
    # A pointer that is not a handle of this library.
    assert (
        child.rc("p.nvmlDeviceGetName(ctypes.cast(ctypes.c_void_p(8), p.c_nvmlDevice_t))")
        == pynvml.NVML_ERROR_INVALID_ARGUMENT
    )


def test_every_call_is_uninitialized_before_init_and_after_shutdown(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = pynvml_child(fake, init=False)
    child.run("p.nvmlLib = ctypes.CDLL(LIB)\np._nvmlGetFunctionPointer_cache.clear()")
    assert child.eval("p.nvmlErrorString(p.NVML_ERROR_UNINITIALIZED)") == "Uninitialized"
    for call in [
        "p.nvmlDeviceGetCount()",
        "p.nvmlSystemGetDriverVersion()",
        "p.nvmlDeviceGetHandleByIndex(0)",
        "p.nvmlEventSetCreate()",
        "p.nvmlShutdown()",
    ]:
        assert child.rc(call) == pynvml.NVML_ERROR_UNINITIALIZED, call
    child.run("p.nvmlInit()\nh = p.nvmlDeviceGetHandleByIndex(0)\np.nvmlShutdown()")
    for call in [
        "p.nvmlDeviceGetName(h)",
        "p.nvmlDeviceGetMemoryInfo(h)",
        "p.nvmlDeviceGetMigMode(h)",
        "p.nvmlDeviceGetComputeRunningProcesses(h)",
    ]:
        assert child.rc(call) == pynvml.NVML_ERROR_UNINITIALIZED, call
    # Handles stay valid across shutdown/init (they are indices).
    child.run("p.nvmlInit()")
    assert child.eval("p.nvmlDeviceGetName(h)") == "NVIDIA A100-SXM4-80GB"


def test_injected_errors(pynvml_child, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, two_gpus())
    child = pynvml_child(fake)
    child.run("h0 = p.nvmlDeviceGetHandleByIndex(0)\nh1 = p.nvmlDeviceGetHandleByIndex(1)")
    fake.inject_error("nvmlDeviceGetUUID", pynvml.NVML_ERROR_GPU_IS_LOST, index=1)
    fake.inject_error("nvmlDeviceGetMemoryInfo_v2", pynvml.NVML_ERROR_UNKNOWN)  # versioned spelling accepted
    assert child.eval("p.nvmlDeviceGetUUID(h0)") == fake.config["devices"][0]["uuid"]
    assert child.rc("p.nvmlDeviceGetUUID(h1)") == pynvml.NVML_ERROR_GPU_IS_LOST
    assert child.rc("p.nvmlDeviceGetMemoryInfo(h0)") == pynvml.NVML_ERROR_UNKNOWN
    assert child.rc("p.nvmlDeviceGetMemoryInfo(h1, version=p.nvmlMemory_v2)") == pynvml.NVML_ERROR_UNKNOWN
    fake.clear_error("nvmlDeviceGetUUID", index=1)
    assert child.eval("p.nvmlDeviceGetUUID(h1)") == fake.config["devices"][1]["uuid"]


def test_injected_init_error(nvml_init, tmp_path):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)], errors={"nvmlInit": 9})
    rc, _ = nvml_init(fake)
    assert rc == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
