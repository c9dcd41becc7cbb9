"""Done-when of the Volcano-protocol issue, end to end with the real `vgpu plugin` process."""
from __future__ import annotations

from vgpu.protocol import decode_register, decode_register_as_volcano, keys
from vgpu.sim.admission import pod_manifest

from .conftest import CORES, MEMORY, NODE, NUMBER, UUID0, UUID1


def test_registers_exact_six_field_record_accepted_by_emulator(cluster):
    reg = cluster.node()["metadata"]["annotations"][keys.REGISTER]
    assert reg == (f"{UUID0},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
                   f"{UUID1},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:")
    assert [r.uuid for r in decode_register(reg)] == [UUID0, UUID1]
    for version in ("v1.9", "v1.12", "v1.15", "master"):
        sched = cluster.scheduler(version)
        sched.sync_nodes()
        assert NODE in sched.core.nodes, (version, sched.core.node_reasons)
        assert [g.uuid for g in sched.core.nodes[NODE].gpus] == [UUID0, UUID1]


def test_two_gpus_3000_mib_50_cores_gets_env_mounts_and_success(cluster):
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 2, MEMORY: 3000, CORES: 50}}]))
    out = cluster.scheduler("master").schedule_once()
    assert [o.node for o in out] == [NODE], out
    res = cluster.admit("p")
    assert res.admitted, res.error
    c = res.container("c")
    uid = cluster.pod("p")["metadata"]["uid"]
    e = c.envs
    assert e["NVIDIA_VISIBLE_DEVICES"] == f"{UUID0},{UUID1}"
    assert e["CUDA_DEVICE_MEMORY_LIMIT_0"] == e["CUDA_DEVICE_MEMORY_LIMIT_1"] == "3000m"
    assert e["CUDA_DEVICE_SM_LIMIT"] == e["CUDA_DEVICE_SM_LIMIT_0"] == e["CUDA_DEVICE_SM_LIMIT_1"] == "50"
    assert e["CUDA_DEVICE_MEMORY_SHARED_CACHE"].startswith("/tmp/vgpu/") and e["CUDA_DEVICE_MEMORY_SHARED_CACHE"].endswith(".cache")
    hook = str(cluster.hook_path)
    mounts = {m.container_path: (m.host_path, m.read_only) for m in c.mounts}
    assert mounts == {
        "/usr/local/vgpu/libvgpu.so": (f"{hook}/libvgpu.so", True),
        "/etc/ld.so.preload": (f"{hook}/ld.so.preload", True),
        "/tmp/vgpu": (f"{hook}/containers/{uid}_c", False),
        "/tmp/vgpulock": ("/tmp/vgpulock", False),
    }
    ann = cluster.annotations("p")
    assert ann[keys.BIND_PHASE] == "success"
    assert ann[keys.VGPU_TIME] == keys.VGPU_TIME_DONE
    assert ann[keys.DEVICES_TO_ALLOCATE] == ""
