"""The bulk MIG reads (MigNvml.read_instances / mig_devices) against the per-call wrappers they
replace on the hot path: same answers, same error naming, in child processes on the fake NVML."""

from __future__ import annotations

import pytest

from vgpu.nvml import errors
from vgpu.sim.nvml import fakenvml

SETUP = """
from vgpu.nvml.mig_calls import MigNvml, Placement, instance_query
m = MigNvml()
d = m.device(0)
assert m.set_mig_mode(d, 1) == 0
one = m.gpu_instance_profile_info(d, 0).id        # 1g.10gb
two = m.gpu_instance_profile_info(d, 1).id        # 2g.20gb
gis = [m.create_gpu_instance(d, one, Placement(s, 1)) for s in (0, 1)]
gis.append(m.create_gpu_instance(d, two, Placement(2, 2)))
ci_one = m.compute_instance_profile_info(gis[0], 0).id
ci_two = m.compute_instance_profile_info(gis[2], 1).id
cis = [m.create_compute_instance(gis[0], ci_one), m.create_compute_instance(gis[2], ci_two)]

def per_call(profiles):
    out = []
    for q, (pid, ci_pids) in enumerate(profiles):
        for gi in m.gpu_instances(d, pid):
            info = m.gpu_instance_info(gi)
            rows = None if ci_pids is None else [
                (ci, m.compute_instance_info(ci).id, k)
                for k, cp in enumerate(ci_pids)
                for ci in m.compute_instances(gi, cp)]
            out.append((gi, q, info.id, info.profile_id, info.placement, rows))
    return out

def mig_per_call():
    out = []
    for i in range(m.max_mig_device_count(d)):
        try:
            mig = m.mig_device_by_index(d, i)
        except Exception:
            continue
        out.append((i, m.mig_gpu_instance_id(mig), m.mig_compute_instance_id(mig), m.uuid(mig)))
    return out
"""


def test_bulk_reads_equal_the_per_call_reads(tmp_path, nvml_child):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    for profiles in ("[(one, [ci_one]), (two, [ci_two])]", "[(two, [ci_two]), (one, None)]", "[(one, [])]"):
        child.run(f"profiles = {profiles}")
        assert child.eval("[tuple(r) for r in m.read_instances(d, instance_query(profiles))] == per_call(profiles)")
    assert child.eval("len(m.read_instances(d, instance_query([(one, [ci_one]), (two, [ci_two])])))") == 3
    assert child.eval("[tuple(r) for r in m.mig_devices(d)] == mig_per_call()")
    assert child.eval("sorted((r.gpu_instance_id, r.compute_instance_id) for r in m.mig_devices(d))") == child.eval(
        "sorted((m.gpu_instance_info(g).id, m.compute_instance_info(c).id) for g, c in zip(gis[::2], cis))"
    )
    # handles of the bulk read drive the mutating wrappers (interned wrappers, same pointers)
    child.run(
        "row = m.read_instances(d, instance_query([(one, [ci_one])]))[0]\n"
        "m.destroy_compute_instance(row.cis[0][0])\nm.destroy_gpu_instance(row.handle)"
    )
    assert child.eval("len(m.read_instances(d, instance_query([(one, [ci_one])])))") == 1
    assert child.eval("len(m.mig_devices(d))") == 1


@pytest.mark.parametrize(
    ("function", "expression", "named"),
    [
        (
            "nvmlDeviceGetGpuInstances",
            "m.read_instances(d, instance_query([(one, [ci_one])]))",
            "nvmlDeviceGetGpuInstances(profileId",
        ),
        (
            "nvmlGpuInstanceGetComputeInstances",
            "m.read_instances(d, instance_query([(one, [ci_one])]))",
            "nvmlGpuInstanceGetComputeInstances(profileId",
        ),
        ("nvmlDeviceGetMigDeviceHandleByIndex", "m.mig_devices(d)", "nvmlDeviceGetMigDeviceHandleByIndex(0)"),
        ("nvmlDeviceGetUUID", "m.mig_devices(d)", "nvmlDeviceGetUUID"),
    ],
)
def test_bulk_read_errors_name_the_failing_call(tmp_path, nvml_child, function, expression, named):
    fake = fakenvml.FakeNvml.create(tmp_path, [fakenvml.device(0)])
    child = nvml_child(fake, SETUP)
    fake.inject_error(function, errors.NVML_ERROR_UNKNOWN)
    with pytest.raises(nvml_child.Error) as info:
        child.eval(expression)
    assert info.value.code == errors.NVML_ERROR_UNKNOWN
    assert named in info.value.message
