"""MIG wrappers (vgpu.nvml.mig_calls) against the fake NVML, in child processes."""

from __future__ import annotations

import json

import pytest

from vgpu.nvml import errors
from vgpu.sim.nvml import fakenvml

SETUP = """
from vgpu.nvml.mig_calls import MigNvml, Placement
m = MigNvml()
d = m.device(0)
"""


def enabled(child) -> None:
    assert child.eval("m.set_mig_mode(d, 1)") == 0
    assert child.eval("m.get_mig_mode(d)") == [1, 1]


def test_non_mig_gpu_answers_not_supported(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0, name="Tesla T4", mig_capable=False)])
    child = nvml_child(fake, SETUP)
    with pytest.raises(nvml_child.Error) as info:
        child.eval("m.get_mig_mode(d)")
    assert info.value.code == errors.NVML_ERROR_NOT_SUPPORTED
    assert "nvmlDeviceGetMigMode" in info.value.message


def test_profile_info_and_placements_a100_80gb(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    enabled(child)
    one = child.eval("m.gpu_instance_profile_info(d, 0)")  # NVML_GPU_INSTANCE_PROFILE_1_SLICE
    assert one["name"] == "MIG 1g.10gb"
    assert (one["slice_count"], one["instance_count"], one["memory_size_mb"]) == (1, 7, 9728)
    three = child.eval("m.gpu_instance_profile_info(d, 2)")
    assert three["name"] == "MIG 3g.40gb" and three["memory_size_mb"] == 40192
    assert child.eval(f"m.gpu_instance_possible_placements(d, {one['id']})") == [
        {"start": s, "size": 1} for s in range(7)
    ]
    assert child.eval(f"m.gpu_instance_possible_placements(d, {three['id']})") == [
        {"start": 0, "size": 4},
        {"start": 4, "size": 4},
    ]


def test_create_query_resolve_destroy(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    enabled(child)
    child.run("""
p2 = m.gpu_instance_profile_info(d, 1)            # 2g.20gb
gi = m.create_gpu_instance(d, p2.id, Placement(2, 2))
gi_info = m.gpu_instance_info(gi)
cip = m.compute_instance_profile_info(gi, 1)      # NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE
ci = m.create_compute_instance(gi, cip.id)
ci_info = m.compute_instance_info(ci)
""")
    gi_info = child.eval("gi_info")
    assert gi_info["placement"] == {"start": 2, "size": 2}
    assert gi_info["profile_id"] == child.eval("p2.id") and gi_info["device_index"] == 0
    assert child.eval("cip.slice_count") == 2 and child.eval("cip.name") is not None
    ci_info = child.eval("ci_info")
    assert ci_info["profile_id"] == child.eval("cip.id") and ci_info["device_index"] == 0
    assert child.eval("ci_info.gpu_instance == gi") is True
    # listing by profile finds exactly that instance
    assert child.eval("[m.gpu_instance_info(g).id for g in m.gpu_instances(d, p2.id)]") == [gi_info["id"]]
    assert child.eval("m.gpu_instance_by_id(d, gi_info.id) == gi") is True
    assert child.eval("[m.compute_instance_info(c).id for c in m.compute_instances(gi, cip.id)]") == [ci_info["id"]]
    # MIG device handle -> GI/CI ids -> UUID (docs/mig.md §6 resolution)
    child.run("""
found = []
for i in range(m.max_mig_device_count(d)):
    try:
        h = m.mig_device_by_index(d, i)
    except Exception as exc:
        if getattr(exc, 'code', None) != 6:   # NOT_FOUND: no MIG device at that index
            raise
        continue
    found.append((m.mig_gpu_instance_id(h), m.mig_compute_instance_id(h), m.uuid(h), m.is_mig_device(h),
                  m.parent_device(h) == d))
""")
    assert child.eval("m.max_mig_device_count(d)") >= 1
    found = child.eval("found")
    assert len(found) == 1
    gi_id, ci_id, uuid, is_mig, parent_ok = found[0]
    assert (gi_id, ci_id) == (gi_info["id"], ci_info["id"])
    assert uuid.startswith("MIG-") and is_mig is True and parent_ok is True
    assert child.eval("m.is_mig_device(d)") is False
    # destroy in order; the lists become empty
    child.run("m.destroy_compute_instance(ci)\nm.destroy_gpu_instance(gi)")
    assert child.eval("m.gpu_instances(d, p2.id)") == []


def test_occupied_placement_is_refused_with_the_nvml_code(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    enabled(child)
    child.run("p = m.gpu_instance_profile_info(d, 2)\ngi = m.create_gpu_instance(d, p.id, Placement(0, 4))")
    with pytest.raises(nvml_child.Error) as info:
        child.eval("m.create_gpu_instance(d, p.id, Placement(0, 4))")
    assert info.value.kind == "NvmlError"
    assert info.value.code not in (None, 0)
    assert "nvmlDeviceCreateGpuInstanceWithPlacement" in info.value.message


def test_destroy_with_processes_surfaces_in_use(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    enabled(child)
    child.run("""
p = m.gpu_instance_profile_info(d, 0)
gi = m.create_gpu_instance(d, p.id, Placement(0, 1))
ci = m.create_compute_instance(gi, m.compute_instance_profile_info(gi, 0).id)
""")
    gi_id, ci_id = child.eval("(m.gpu_instance_info(gi).id, m.compute_instance_info(ci).id)")
    fake.update_device(
        0,
        processes=[
            {"pid": 999, "used_memory_mib": 5, "sm_util": 1, "gpu_instance_id": gi_id, "compute_instance_id": ci_id}
        ],
    )
    with pytest.raises(nvml_child.Error) as info:
        child.eval("m.destroy_compute_instance(ci)")
    assert info.value.code == errors.NVML_ERROR_IN_USE
    assert "nvmlComputeInstanceDestroy" in info.value.message
    assert "NVML_ERROR_IN_USE" in info.value.message
    with pytest.raises(nvml_child.Error) as info:
        child.eval("m.destroy_gpu_instance(gi)")
    assert info.value.code == errors.NVML_ERROR_IN_USE
    # the process is gone -> destroy succeeds
    fake.update_device(0, processes=[])
    child.run("m.destroy_compute_instance(ci)\nm.destroy_gpu_instance(gi)")
    assert child.eval("m.gpu_instances(d, p.id)") == []


def test_instances_created_by_one_process_are_seen_by_another(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    a = nvml_child(fake, SETUP)
    enabled(a)
    a.run("p = m.gpu_instance_profile_info(d, 4)\ngi = m.create_gpu_instance(d, p.id, Placement(0, 8))")
    b = nvml_child(fake, SETUP)
    assert b.eval("m.get_mig_mode(d)") == [1, 1]
    infos = b.eval("[m.gpu_instance_info(g) for g in m.gpu_instances(d, m.gpu_instance_profile_info(d, 4).id)]")
    assert [i["placement"] for i in infos] == [{"start": 0, "size": 8}]
    assert json.dumps(infos[0]["id"]) == json.dumps(a.eval("m.gpu_instance_info(gi).id"))
