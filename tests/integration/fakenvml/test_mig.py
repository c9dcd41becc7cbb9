"""MIG in the fake NVML: mode, instances, MIG device handles, state shared between processes."""

from __future__ import annotations

import re

import pynvml

from vgpu.sim.nvml import fakenvml

MIB = 1024 * 1024
GI_2G = 14  # A100 2g.20gb profile id
GI_1G = 19  # A100 1g.10gb profile id
GI_7G = 0
CI_1 = pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE
CI_2 = pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE

HELPERS = (
    "h = p.nvmlDeviceGetHandleByIndex(0)\n"
    "def place(start, size):\n"
    "    return ctypes.byref(p.c_nvmlGpuInstancePlacement_t(start, size))\n"
    "def gi_create(profile_id, start=None, size=None):\n"
    "    if start is None:\n"
    "        return p.nvmlDeviceCreateGpuInstance(h, profile_id)\n"
    "    return p.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, place(start, size))\n"
    "def gi_list(profile_id, cap=8):\n"
    "    arr = (p.c_nvmlGpuInstance_t * cap)()\n"
    "    n = ctypes.c_uint(0)\n"
    "    p.nvmlDeviceGetGpuInstances(h, profile_id, arr, ctypes.byref(n))\n"
    "    return [arr[i] for i in range(n.value)]\n"
    "def gi_info(gi):\n"
    "    i = p.nvmlGpuInstanceGetInfo(gi)\n"
    "    return {'id': i.id, 'profile': i.profileId, 'start': i.placement.start, 'size': i.placement.size,\n"
    "            'device': addr(i.device)}\n"
    "def ci_list(gi, profile, cap=8):\n"
    "    arr = (p.c_nvmlComputeInstance_t * cap)()\n"
    "    n = ctypes.c_uint(0)\n"
    "    p.nvmlGpuInstanceGetComputeInstances(gi, profile, arr, ctypes.byref(n))\n"
    "    return [arr[i] for i in range(n.value)]\n"
    "def mig_devices():\n"
    "    out = []\n"
    "    for i in range(p.nvmlDeviceGetMaxMigDeviceCount(h)):\n"
    "        try:\n"
    "            m = p.nvmlDeviceGetMigDeviceHandleByIndex(h, i)\n"
    "        except p.NVMLError_NotFound:\n"
    "            continue\n"
    "        out.append({'gi': p.nvmlDeviceGetGpuInstanceId(m), 'ci': p.nvmlDeviceGetComputeInstanceId(m),\n"
    "                    'uuid': p.nvmlDeviceGetUUID(m), 'name': p.nvmlDeviceGetName(m),\n"
    "                    'total': p.nvmlDeviceGetMemoryInfo(m).total})\n"
    "    return out\n"
)


def mig_fake(tmp_path, **dev) -> fakenvml.FakeNvml:
    return fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, **dev), fakenvml.device(1, name="Tesla T4")])


def test_mig_mode_get_set_takes_effect_at_once_and_persists(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path)
    child = pynvml_child(fake)
    child.run(HELPERS)
    assert child.eval("p.nvmlDeviceGetMigMode(h)") == [0, 0]
    assert child.eval("p.nvmlDeviceSetMigMode(h, p.NVML_DEVICE_MIG_ENABLE)") == 0  # activation status
    assert child.eval("p.nvmlDeviceGetMigMode(h)") == [1, 1]
    assert child.eval("p.nvmlDeviceSetMigMode(h, 1)") == 0  # idempotent
    assert fake.read_state()["devices"][0] == {
        "uuid": fake.config["devices"][0]["uuid"],
        "mig_mode": True,
        "gpu_instances": [],
    }
    other = pynvml_child(fake)
    assert other.eval("p.nvmlDeviceGetMigMode(p.nvmlDeviceGetHandleByIndex(0))") == [1, 1]
    assert child.rc("p.nvmlDeviceSetMigMode(h, 2)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    child.run("p.nvmlDeviceSetMigMode(h, 0)")
    assert other.eval("p.nvmlDeviceGetMigMode(p.nvmlDeviceGetHandleByIndex(0))") == [0, 0]


def test_state_file_beats_the_config_initial_mode(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    child = pynvml_child(fake)
    child.run(HELPERS + "p.nvmlDeviceSetMigMode(h, 0)")
    fake.update_device(0, memory_used_mib=1)  # any rewrite of the config keeps the state's mode
    assert child.eval("p.nvmlDeviceGetMigMode(h)") == [0, 0]
    assert pynvml_child(fake).eval("p.nvmlDeviceGetMigMode(p.nvmlDeviceGetHandleByIndex(0))") == [0, 0]


def test_non_mig_gpu_refuses_mig_calls(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path)
    child = pynvml_child(fake)
    child.run("t4 = p.nvmlDeviceGetHandleByIndex(1)")
    for call in [
        "p.nvmlDeviceGetMigMode(t4)",
        "p.nvmlDeviceSetMigMode(t4, 1)",
        "p.nvmlDeviceGetGpuInstanceProfileInfo(t4, 0)",
        "p.nvmlDeviceGetGpuInstanceProfileInfo(t4, 0, 1)",
        "p.nvmlDeviceGetMaxMigDeviceCount(t4)",
        "p.nvmlDeviceCreateGpuInstance(t4, 19)",
        "p.nvmlDeviceGetMigDeviceHandleByIndex(t4, 0)",
        "p.nvmlDeviceGetGpuInstanceById(t4, 1)",
        "p.nvmlDeviceGetGpuInstanceRemainingCapacity(t4, 19)",
        "p.nvmlDeviceGetGpuInstancePossiblePlacements(t4, 19, None, ctypes.byref(ctypes.c_uint()))",
    ]:
        assert child.rc(call) == pynvml.NVML_ERROR_NOT_SUPPORTED, call
    assert child.eval("p.nvmlDeviceIsMigDeviceHandle(t4)") == 0


def test_instances_need_mig_mode(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path)
    child = pynvml_child(fake)
    child.run(HELPERS)
    assert child.rc(f"gi_create({GI_1G})") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.rc(f"gi_list({GI_1G})") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.rc("p.nvmlDeviceGetGpuInstanceById(h, 1)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.rc(f"p.nvmlDeviceGetGpuInstanceRemainingCapacity(h, {GI_1G})") == pynvml.NVML_ERROR_NOT_SUPPORTED
    # Static profile data is available whatever the mode.
    assert child.eval("p.nvmlDeviceGetGpuInstanceProfileInfo(h, 0).id") == GI_1G
    assert child.eval("p.nvmlDeviceGetMaxMigDeviceCount(h)") == 7
    assert child.rc("p.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)") == pynvml.NVML_ERROR_NOT_FOUND


def test_full_plugin_sequence_group2(pynvml_child, tmp_path):
    """docs/mig.md §5.2/§6: create 2g.20gb@0,2,4 + 1g.10gb@6, one full CI each, resolve MIG devices."""
    fake = mig_fake(tmp_path, mig_mode=True)
    child = pynvml_child(fake)
    child.run(HELPERS)
    plan = [(GI_2G, 0, 2, CI_2), (GI_2G, 2, 2, CI_2), (GI_2G, 4, 2, CI_2), (GI_1G, 6, 1, CI_1)]
    for profile, start, size, ci_const in plan:
        child.run(
            f"gi = gi_create({profile}, {start}, {size})\n"
            f"ci_info = p.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, {ci_const}, "
            "p.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)\n"
            "ci = p.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id)"
        )
        info = child.eval("gi_info(gi)")
        assert (info["profile"], info["start"], info["size"]) == (profile, start, size)
        assert info["device"] == child.eval("addr(h)")
        ci = child.eval("p.nvmlComputeInstanceGetInfo(ci)")
        assert ci["id"] == 0 and ci["profileId"] == ci_const
        assert ci["placement"] == {"start": 0, "size": size}
        assert ci["gpuInstance"] == child.eval("addr(gi)") and ci["device"] == child.eval("addr(h)")
        assert child.eval("p.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, ci_info.id, 0).name") == (
            "MIG 2g.20gb" if size == 2 else "MIG 1g.10gb"
        )
    gis = child.eval(f"[gi_info(g) for g in gi_list({GI_2G})]")
    assert [(g["id"], g["start"]) for g in gis] == [(1, 0), (2, 2), (3, 4)]
    assert child.eval(f"[gi_info(g)['id'] for g in gi_list({GI_1G})]") == [4]
    migs = child.eval("mig_devices()")
    assert [(m["gi"], m["ci"]) for m in migs] == [(1, 0), (2, 0), (3, 0), (4, 0)]
    assert [m["total"] for m in migs] == [19968 * MIB] * 3 + [9728 * MIB]
    assert migs[0]["name"] == "NVIDIA A100-SXM4-80GB MIG 2g.20gb"
    assert all(
        re.fullmatch(r"MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", m["uuid"]) for m in migs
    )
    assert len({m["uuid"] for m in migs}) == 4
    # MIG handle <-> parent, by UUID, ids.
    child.run("m = p.nvmlDeviceGetMigDeviceHandleByIndex(h, 3)")
    assert child.eval("p.nvmlDeviceIsMigDeviceHandle(m)") == 1
    assert child.eval("addr(p.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m)) == addr(h)") is True
    assert child.eval(f"addr(p.nvmlDeviceGetHandleByUUID({migs[3]['uuid']!r})) == addr(m)") is True
    assert child.rc("p.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("p.nvmlDeviceGetGpuInstanceId(h)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.rc("p.nvmlDeviceGetComputeInstanceId(h)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.rc("p.nvmlDeviceGetMigDeviceHandleByIndex(h, 4)") == pynvml.NVML_ERROR_NOT_FOUND
    assert child.rc("p.nvmlDeviceGetMigDeviceHandleByIndex(h, 7)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    # By id.
    assert child.eval("gi_info(p.nvmlDeviceGetGpuInstanceById(h, 2))['start']") == 2
    assert child.rc("p.nvmlDeviceGetGpuInstanceById(h, 9)") == pynvml.NVML_ERROR_NOT_FOUND
    child.run("g2 = p.nvmlDeviceGetGpuInstanceById(h, 2)")
    assert child.eval("p.nvmlComputeInstanceGetInfo(p.nvmlGpuInstanceGetComputeInstanceById(g2, 0)).id") == 0
    assert child.rc("p.nvmlGpuInstanceGetComputeInstanceById(g2, 1)") == pynvml.NVML_ERROR_NOT_FOUND
    assert child.eval(f"len(ci_list(g2, {CI_2}))") == 1
    # The whole GPU is full now.
    assert child.rc(f"gi_create({GI_1G})") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert child.eval(f"p.nvmlDeviceGetGpuInstanceRemainingCapacity(h, {GI_1G})") == 0
    # Utilization is not reported on a MIG-enabled GPU or a MIG device.
    assert child.rc("p.nvmlDeviceGetUtilizationRates(h)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.rc("p.nvmlDeviceGetUtilizationRates(m)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    # Tear down in the plugin's order: CIs, then GIs.
    child.run(
        f"for g in gi_list({GI_2G}) + gi_list({GI_1G}):\n"
        f"    for prof in ({CI_1}, {CI_2}):\n"
        "        try:\n"
        "            cis = ci_list(g, prof)\n"
        "        except p.NVMLError_InvalidArgument:\n"
        "            continue\n"
        "        for c in cis:\n"
        "            p.nvmlComputeInstanceDestroy(c)\n"
        "    p.nvmlGpuInstanceDestroy(g)"
    )
    assert child.eval("mig_devices()") == []
    assert fake.read_state()["devices"][0]["gpu_instances"] == []


def test_state_is_shared_between_processes(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    first = pynvml_child(fake)
    second = pynvml_child(fake)
    first.run(HELPERS + f"gi = gi_create({GI_2G}, 2, 2)\nci = p.nvmlGpuInstanceCreateComputeInstance(gi, {CI_2})")
    second.run(HELPERS)
    assert second.eval(f"[gi_info(g) for g in gi_list({GI_2G})]") == [
        {"id": 1, "profile": GI_2G, "start": 2, "size": 2, "device": second.eval("addr(h)")}
    ]
    assert [(m["gi"], m["ci"]) for m in second.eval("mig_devices()")] == [(1, 0)]
    assert second.eval("mig_devices()")[0]["uuid"] == first.eval("mig_devices()")[0]["uuid"]
    # The second process creates at an overlapping placement: refused with the first's instance in mind.
    assert second.rc(f"gi_create({GI_2G}, 2, 2)") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    second.run(f"gi2 = gi_create({GI_2G}, 0, 2)")
    assert first.eval(f"[gi_info(g)['start'] for g in gi_list({GI_2G})]") == [2, 0]  # ordered by GI id
    # One destroys what the other created; the other's handle is then stale.
    second.run(
        f"p.nvmlComputeInstanceDestroy(ci_list(p.nvmlDeviceGetGpuInstanceById(h, 1), {CI_2})[0])\n"
        "p.nvmlGpuInstanceDestroy(p.nvmlDeviceGetGpuInstanceById(h, 1))"
    )
    assert first.rc("p.nvmlGpuInstanceGetInfo(gi)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert first.rc("p.nvmlComputeInstanceGetInfo(ci)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert first.eval(f"[gi_info(g)['start'] for g in gi_list({GI_2G})]") == [0]


def test_concurrent_creation_from_two_processes_loses_nothing(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    a, b = pynvml_child(fake), pynvml_child(fake)
    for child in (a, b):
        child.run(HELPERS)
    # Interleave without waiting: each process creates 1g instances until the GPU is full.
    script = (
        f"made = []\n"
        "while True:\n"
        "    try:\n"
        f"        made.append(gi_info(gi_create({GI_1G}))['id'])\n"
        "    except p.NVMLError_InsufficientResources:\n"
        "        break"
    )
    a.send("exec", script)
    b.send("exec", script)
    a.receive()
    b.receive()
    made = a.eval("made") + b.eval("made")
    assert sorted(made) == [1, 2, 3, 4, 5, 6, 7]
    assert sorted(g["start"] for g in a.eval(f"[gi_info(g) for g in gi_list({GI_1G})]")) == list(range(7))


def test_placement_and_capacity_errors(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    child = pynvml_child(fake)
    child.run(HELPERS)
    # Not one of the profile's placements / wrong size / unknown profile id.
    assert child.rc(f"gi_create({GI_2G}, 1, 2)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc(f"gi_create({GI_2G}, 0, 1)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("gi_create(3)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("p.nvmlDeviceCreateGpuInstanceWithPlacement(h, 14, None)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("p.nvmlDeviceGetGpuInstanceProfileInfo(h, 0x12)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("p.nvmlDeviceGetGpuInstanceProfileInfo(h, 0x5)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.eval(f"p.nvmlDeviceGetGpuInstanceRemainingCapacity(h, {GI_2G})") == 3
    child.run("big = gi_create(9, 0, 4)")  # 3g.40gb
    assert child.eval(f"p.nvmlDeviceGetGpuInstanceRemainingCapacity(h, {GI_2G})") == 1
    # Overlapping memory slices.
    assert child.rc(f"gi_create({GI_2G}, 2, 2)") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert child.rc(f"gi_create({GI_1G}, 3, 1)") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert child.rc(f"gi_create({GI_7G})") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    # Without a placement: the first free one.
    assert child.eval(f"gi_info(gi_create({GI_1G}))['start']") == 4
    # +me exists once per GPU.
    child.run("me = gi_create(20)")
    assert child.rc("gi_create(20)") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    # Compute instances: one full-slice CI per 3-slice GI; a second does not fit.
    child.run("c3 = p.nvmlGpuInstanceCreateComputeInstance(big, 2)")
    assert child.rc("p.nvmlGpuInstanceCreateComputeInstance(big, 2)") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert child.rc("p.nvmlGpuInstanceCreateComputeInstance(big, 0)") == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert child.rc("p.nvmlGpuInstanceCreateComputeInstance(big, 3)") == pynvml.NVML_ERROR_INVALID_ARGUMENT  # 4 slices
    assert child.rc("p.nvmlGpuInstanceGetComputeInstanceProfileInfo(big, 3, 0)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert child.rc("p.nvmlGpuInstanceGetComputeInstanceProfileInfo(big, 9, 0)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("p.nvmlGpuInstanceGetComputeInstanceProfileInfo(big, 0, 1)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    # A GI with a CI cannot be destroyed.
    assert child.rc("p.nvmlGpuInstanceDestroy(big)") == pynvml.NVML_ERROR_IN_USE
    child.run("p.nvmlComputeInstanceDestroy(c3)\np.nvmlGpuInstanceDestroy(big)")
    assert child.rc("p.nvmlGpuInstanceDestroy(big)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert child.rc("p.nvmlComputeInstanceDestroy(c3)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
    # Small buffers: INSUFFICIENT_SIZE with the required count.
    child.run(
        "n = ctypes.c_uint(2)\narr = (p.c_nvmlGpuInstancePlacement_t * 2)()\n"
        "rc = p.nvmlLib.nvmlDeviceGetGpuInstancePossiblePlacements_v2(h, 19, arr, ctypes.byref(n))"
    )
    assert child.eval("(rc, n.value)") == [pynvml.NVML_ERROR_INSUFFICIENT_SIZE, 7]
    # MIG mode cannot be turned off while instances exist.
    assert child.rc("p.nvmlDeviceSetMigMode(h, 0)") == pynvml.NVML_ERROR_IN_USE


def test_compute_instance_profiles_inside_a_7g_instance(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    child = pynvml_child(fake)
    child.run(HELPERS + f"g = gi_create({GI_7G})")
    infos = child.eval(
        "[(lambda i: (i.id, i.sliceCount, i.instanceCount, i.name))("
        "p.nvmlGpuInstanceGetComputeInstanceProfileInfo(g, c, 0)) for c in (0, 1, 2, 3, 4)]"
    )
    assert infos == [
        [0, 1, 7, "MIG 1c.7g.80gb"],
        [1, 2, 3, "MIG 2c.7g.80gb"],
        [2, 3, 2, "MIG 3c.7g.80gb"],
        [3, 4, 1, "MIG 4c.7g.80gb"],
        [4, 7, 1, "MIG 7g.80gb"],
    ]
    v1 = child.eval("p.nvmlGpuInstanceGetComputeInstanceProfileInfo(g, 4, 0, version=1)")
    assert (v1["id"], v1["sliceCount"], v1["multiprocessorCount"]) == (4, 7, 98)
    placements = child.eval(
        "(lambda n, a: (p.nvmlGpuInstanceGetComputeInstancePossiblePlacements(g, 1, a, "
        "ctypes.byref(n)), [(a[i].start, a[i].size) for i in range(n.value)]))"
        "(ctypes.c_uint(8), (p.c_nvmlComputeInstancePlacement_t * 8)())"
    )[1]
    assert placements == [[0, 2], [2, 2], [4, 2]]
    child.run(
        "c = p.nvmlGpuInstanceCreateComputeInstanceWithPlacement(g, 1, "
        "ctypes.byref(p.c_nvmlComputeInstancePlacement_t(2, 2)))"
    )
    assert child.eval("plain(p.nvmlComputeInstanceGetInfo(c).placement)") == {"start": 2, "size": 2}
    assert (
        child.rc(
            "p.nvmlGpuInstanceCreateComputeInstanceWithPlacement(g, 1, "
            "ctypes.byref(p.c_nvmlComputeInstancePlacement_t(1, 2)))"
        )
        == pynvml.NVML_ERROR_INVALID_ARGUMENT
    )
    assert (
        child.rc(
            "p.nvmlGpuInstanceCreateComputeInstanceWithPlacement(g, 1, "
            "ctypes.byref(p.c_nvmlComputeInstancePlacement_t(2, 2)))"
        )
        == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )
    assert child.eval("p.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(g, 0)") == 5
    assert child.eval("p.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(g, 4)") == 0
    child.run("c0 = p.nvmlGpuInstanceCreateComputeInstance(g, 0)")
    assert child.eval("p.nvmlComputeInstanceGetInfo(c0).id") == 1
    assert [(m["gi"], m["ci"]) for m in child.eval("mig_devices()")] == [(1, 0), (1, 1)]


def test_processes_on_mig_instances_block_destroy(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    child = pynvml_child(fake)
    child.run(
        HELPERS + f"g1 = gi_create({GI_2G}, 0, 2)\nc1 = p.nvmlGpuInstanceCreateComputeInstance(g1, {CI_2})\n"
        f"g2 = gi_create({GI_2G}, 2, 2)\nc2 = p.nvmlGpuInstanceCreateComputeInstance(g2, {CI_2})"
    )
    fake.update_device(
        0, processes=[{"pid": 77, "used_memory_mib": 512, "sm_util": 9, "gpu_instance_id": 1, "compute_instance_id": 0}]
    )
    assert child.rc("p.nvmlComputeInstanceDestroy(c1)") == pynvml.NVML_ERROR_IN_USE
    assert child.rc("p.nvmlGpuInstanceDestroy(g1)") == pynvml.NVML_ERROR_IN_USE
    # The process shows up on its MIG device only, and on the parent with its ids.
    child.run("m1 = p.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)\nm2 = p.nvmlDeviceGetMigDeviceHandleByIndex(h, 1)")
    assert child.eval("p.nvmlDeviceGetComputeRunningProcesses(m1)") == [
        {"pid": 77, "usedGpuMemory": 512 * MIB, "gpuInstanceId": 1, "computeInstanceId": 0}
    ]
    assert child.eval("p.nvmlDeviceGetComputeRunningProcesses(m2)") == []
    assert child.eval("[x.gpuInstanceId for x in p.nvmlDeviceGetComputeRunningProcesses(h)]") == [1]
    assert child.eval("p.nvmlDeviceGetMemoryInfo(m1).used") == 512 * MIB
    assert child.rc("p.nvmlDeviceGetProcessUtilization(h, 0)") == pynvml.NVML_ERROR_NOT_SUPPORTED
    # The other instance is free to go.
    child.run("p.nvmlComputeInstanceDestroy(c2)\np.nvmlGpuInstanceDestroy(g2)")
    # A whole-GPU process on a MIG-mode GPU blocks every destroy.
    fake.update_device(0, processes=[{"pid": 78, "used_memory_mib": 1, "sm_util": 1}])
    assert child.rc("p.nvmlComputeInstanceDestroy(c1)") == pynvml.NVML_ERROR_IN_USE
    fake.update_device(0, processes=[])
    child.run("p.nvmlComputeInstanceDestroy(c1)\np.nvmlGpuInstanceDestroy(g1)")
    # A busy GPU cannot change MIG mode.
    fake.update_device(0, processes=[{"pid": 79}])
    child.run("st = ctypes.c_int(-1)\nrc = p.nvmlLib.nvmlDeviceSetMigMode(h, 0, ctypes.byref(st))")
    assert child.eval("(rc, st.value)") == [pynvml.NVML_ERROR_IN_USE, pynvml.NVML_ERROR_IN_USE]


def test_a_corrupt_state_file_is_reported(pynvml_child, nvml_init, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    child = pynvml_child(fake)
    child.run(HELPERS + f"gi_create({GI_1G})")
    fake.state_path.write_text("{not json")
    # A running process keeps its last good MIG state and says so once.
    assert child.eval(f"len(gi_list({GI_1G}))") == 1
    assert child.eval(f"len(gi_list({GI_1G}))") == 1
    errors = [line for line in child.stderr().splitlines() if "MIG state" in line]
    assert len(errors) == 1 and str(fake.state_path) in errors[0]
    # A change needs a readable state file.
    assert child.rc(f"gi_create({GI_1G})") == pynvml.NVML_ERROR_UNKNOWN
    rc, err = nvml_init(fake)
    assert rc == pynvml.NVML_ERROR_UNKNOWN and str(fake.state_path) in err and "delete it" in err


def test_state_path_from_environment(pynvml_child, tmp_path):
    fake = mig_fake(tmp_path, mig_mode=True)
    elsewhere = tmp_path / "other" / "mig.json"
    elsewhere.parent.mkdir()
    child = pynvml_child(fake, env={"FAKE_NVML_STATE": str(elsewhere)})
    child.run(HELPERS + f"gi_create({GI_1G})")
    assert elsewhere.exists() and not fake.state_path.exists()


def test_python_and_library_agree_on_which_models_are_mig_capable(pynvml_child, tmp_path):
    names = [
        "NVIDIA A30",
        "NVIDIA RTX A3000",
        "Tesla T4",
        "NVIDIA A100-PCIE-40GB",
        "NVIDIA A100 80GB PCIe",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 PCIe",
        "NVIDIA H200 141GB HBM3e",
        "NVIDIA L40S",
    ]
    devices = []
    for i, name in enumerate(names):
        dev = fakenvml.device(i, name=name)
        del dev["mig_capable"]  # let the library decide from the name
        devices.append(dev)
    fake = fakenvml.FakeNvml.create(tmp_path, devices)
    child = pynvml_child(fake)
    capable = [child.rc(f"p.nvmlDeviceGetMigMode(p.nvmlDeviceGetHandleByIndex({i}))") == 0 for i in range(len(names))]
    assert capable == [fakenvml.has_mig_table(n) for n in names]
    assert capable == [True, False, False, True, True, True, False, True, False]


def test_versioned_profile_info_structs(pynvml_child, tmp_path):
    """ProfileInfoV accepts the v2 and v3 layouts by their version word; ById looks up by profile id."""
    fake = mig_fake(tmp_path, mig_mode=True)
    child = pynvml_child(fake)
    child.run(
        HELPERS
        + (
            "class GiV3(ctypes.Structure):\n"
            "    _fields_ = [(n, ctypes.c_uint) for n in ('version', 'id', 'sliceCount', 'instanceCount',\n"
            "               'multiprocessorCount', 'copyEngineCount', 'decoderCount', 'encoderCount', 'jpegCount',\n"
            "               'ofaCount')] + [('memorySizeMB', ctypes.c_ulonglong), ('name', ctypes.c_char * 96),\n"
            "               ('capabilities', ctypes.c_uint)]\n"
            "class CiV3(ctypes.Structure):\n"
            "    _fields_ = [(n, ctypes.c_uint) for n in ('version', 'id', 'sliceCount', 'instanceCount',\n"
            "               'multiprocessorCount', 'sharedCopyEngineCount', 'sharedDecoderCount',\n"
            "               'sharedEncoderCount', 'sharedJpegCount', 'sharedOfaCount')] "
            "+ [('name', ctypes.c_char * 96),\n"
            "               ('capabilities', ctypes.c_uint)]\n"
            "gi3 = GiV3(version=0x03000098)\n"
            "rc_gi3 = p.nvmlLib.nvmlDeviceGetGpuInstanceProfileInfoV(h, 1, ctypes.byref(gi3))\n"
            "g = gi_create(14)\n"
            "ci3 = CiV3(version=0x0300008C)\n"
            "rc_ci3 = p.nvmlLib.nvmlGpuInstanceGetComputeInstanceProfileInfoV(g, 1, 0, ctypes.byref(ci3))\n"
            "bad = p.c_nvmlGpuInstanceProfileInfo_v2_t()\n"
            "bad.version = 0x01000098\n"
            "rc_bad = p.nvmlLib.nvmlDeviceGetGpuInstanceProfileInfoV(h, 1, ctypes.byref(bad))\n"
        )
    )
    assert child.eval("ctypes.sizeof(GiV3), ctypes.sizeof(CiV3)") == [0x98, 0x8C]
    assert child.eval("(rc_gi3, gi3.id, gi3.sliceCount, gi3.memorySizeMB, gi3.name, gi3.capabilities)") == [
        0,
        14,
        2,
        19968,
        "MIG 2g.20gb",
        0,
    ]
    assert child.eval("(rc_ci3, ci3.id, ci3.sliceCount, ci3.instanceCount, ci3.name)") == [0, 1, 2, 1, "MIG 2g.20gb"]
    assert child.eval("rc_bad") == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    by_id = child.eval("p.nvmlDeviceGetGpuInstanceProfileInfoById(h, 15)")
    assert (by_id["id"], by_id["sliceCount"], by_id["instanceCount"], by_id["name"]) == (15, 1, 4, "MIG 1g.20gb")
    assert child.rc("p.nvmlDeviceGetGpuInstanceProfileInfoById(h, 1)") == pynvml.NVML_ERROR_INVALID_ARGUMENT
