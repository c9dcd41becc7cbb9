"""Device-list strategies and CDI through the real `vgpu plugin` process (docs/cdi.md).

The simulated cluster of the Volcano end-to-end tests (API server, fake kubelet, scheduler
emulator, fake NVML), with the plugin's CDI settings in its environment.  Every CDI name an
Allocate returns goes through the resolver stand-in over the spec directory that the fake NVML
helper wrote as ``nvidia-ctk cdi generate`` would; a name it cannot resolve fails the test, as
it would fail the container on a node.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.integration.volcano.conftest import (  # noqa: F401 - fixtures used by name
    CORES,
    MEMORY,
    NODE,
    NUMBER,
    UUID0,
    UUID1,
    a100,
    apiserver,
    cluster_factory,
    hook_path,
)
from vgpu.hamicore import paths
from vgpu.protocol import keys
from vgpu.sim.cdi import CdiResolver, UnresolvableCdiDevices
from vgpu.sim.kubelet.admission import ContainerResult, pod_manifest
from vgpu.sim.nvml import fakenvml
from vgpu.sim.nvml.cdi_spec import write_spec

from .conftest import PluginProcess

DEVICES = [a100(0, UUID0), a100(1, UUID1)]
MIG_NODE_CONFIG = json.dumps({"nodeconfig": [{"name": NODE, "operatingmode": "mig", "devicesplitcount": 7}]})
HAMI_MOUNTS = (
    paths.CONTAINER_LIBVGPU,
    paths.CONTAINER_LD_SO_PRELOAD,
    paths.CONTAINER_CACHE_DIR,
    paths.CONTAINER_VGPULOCK,
)


def spec_dir_for(tmp_path: pathlib.Path, devices, strategy: str) -> pathlib.Path:
    """A spec directory written from a fake NVML with the same GPUs (same UUIDs and indices)."""
    spec_dir = tmp_path / "cdi"
    write_spec(fakenvml.FakeNvml.create(tmp_path / "spec-nvml", devices), spec_dir, strategies=[strategy])
    return spec_dir


def cdi_env(strategy: str, names: str, spec_dir: pathlib.Path) -> dict[str, str]:
    return {"DEVICE_LIST_STRATEGY": strategy, "CDI_DEVICE_NAME_STRATEGY": names, "CDI_SPEC_DIRS": str(spec_dir)}


def run_pod(cluster, name: str, limits: dict, annotations: dict | None = None) -> ContainerResult:
    cluster.create_pod(pod_manifest(name, [{"name": "cuda", "limits": limits}], annotations=annotations))
    assert [o.node for o in cluster.scheduler("master").schedule_once()] == [NODE]
    res = cluster.admit(name)
    assert res.admitted, res.error
    assert cluster.annotations(name)[keys.BIND_PHASE] == "success"
    return res.container("cuda")


def resolved(spec_dir: pathlib.Path, c: ContainerResult):
    """What the runtime injects for the container's CDI names (raises when one is unresolvable)."""
    return CdiResolver([spec_dir]).resolve_container(c.cdi_devices, c.annotations)


def assigned_uuid(cluster, pod: str) -> str:
    return cluster.annotations(pod)[keys.VGPU_IDS_NEW].split(",", 1)[0]


@pytest.mark.parametrize(
    ("strategy", "names"),
    [
        ("cdi-cri", "uuid"),
        ("cdi-cri", "index"),
        ("cdi-annotations", "uuid"),
        ("envvar,cdi-cri", "index"),
        ("cdi-annotations,cdi-cri", "uuid"),
    ],
)
def test_hami_core_allocation_under_cdi_strategies(tmp_path, cluster_factory, strategy, names):  # noqa: F811
    spec_dir = spec_dir_for(tmp_path, DEVICES, names)
    cluster = cluster_factory(DEVICES, env=cdi_env(strategy, names, spec_dir))
    assert cluster.plugin.wait_for_log("CDI: strategies", 10)
    assert "all 2 device name(s) resolve" in cluster.plugin.log()
    c = run_pod(cluster, "cdi", {NUMBER: 1, MEMORY: 8192, CORES: 30})
    uuid = assigned_uuid(cluster, "cdi")
    expected = f"nvidia.com/gpu={uuid if names == 'uuid' else [UUID0, UUID1].index(uuid)}"
    strategies = strategy.split(",")
    assert c.cdi_devices == ([expected] if "cdi-cri" in strategies else [])
    if "cdi-annotations" in strategies:
        ((key, value),) = c.annotations.items()
        assert key.startswith("cdi.k8s.io/vgpu-device-plugin_") and value == expected
    else:
        assert c.annotations == {}
    if "envvar" in strategies:
        assert c.envs["NVIDIA_VISIBLE_DEVICES"] == uuid
    else:
        assert "NVIDIA_VISIBLE_DEVICES" not in c.envs
    # HAMi-core's env and mounts come whatever the strategy
    assert c.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "8192m" and c.envs["CUDA_DEVICE_SM_LIMIT"] == "30"
    assert {m.container_path for m in c.mounts} == set(HAMI_MOUNTS)
    edits = resolved(spec_dir, c)
    assert f"/dev/nvidia{[UUID0, UUID1].index(uuid)}" in edits.device_nodes
    assert any("libcuda.so" in host for host, _ in edits.mounts)


def test_volume_mounts_lists_two_gpus_as_mounts(tmp_path, cluster_factory):  # noqa: F811
    spec_dir = spec_dir_for(tmp_path, DEVICES, "uuid")
    cluster = cluster_factory(DEVICES, env=cdi_env("volume-mounts", "uuid", spec_dir))
    c = run_pod(cluster, "vm", {NUMBER: 2, MEMORY: 1000})
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == "/var/run/nvidia-container-devices"
    devs = sorted(m.container_path for m in c.mounts if m.host_path == "/dev/null")
    assert devs == sorted(f"/var/run/nvidia-container-devices/{u}" for u in (UUID0, UUID1))
    assert {m.container_path for m in c.mounts if m.host_path != "/dev/null"} == set(HAMI_MOUNTS)
    assert c.cdi_devices == [] and c.annotations == {}


def test_envvar_and_cdi_annotations_on_two_gpus_keep_one_order(tmp_path, cluster_factory):  # noqa: F811
    spec_dir = spec_dir_for(tmp_path, DEVICES, "uuid")
    cluster = cluster_factory(DEVICES, env=cdi_env("envvar,cdi-annotations", "uuid", spec_dir))
    d = run_pod(cluster, "both", {NUMBER: 2, MEMORY: 1000})
    ids = d.envs["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert sorted(ids) == sorted([UUID0, UUID1])
    (value,) = d.annotations.values()
    assert value.split(",") == [f"nvidia.com/gpu={u}" for u in ids]  # the same (PCI bus) order
    resolved(spec_dir, d)


def test_missing_spec_is_reported_at_startup_and_the_names_do_not_resolve(tmp_path, cluster_factory):  # noqa: F811
    empty = tmp_path / "no-specs"
    empty.mkdir()
    cluster = cluster_factory(
        DEVICES, env=cdi_env("cdi-cri", "uuid", empty) | {"CDI_SPEC_DIRS": f"{empty},{tmp_path / 'absent'}"}
    )
    assert cluster.plugin.wait_for_log("are in no CDI spec", 10)
    log = cluster.plugin.log()
    assert f"nvidia.com/gpu={UUID0}" in log and "containers given them will fail to start" in log
    assert "absent: no such directory" in log
    events = cluster.store.wait_for(
        lambda s: [e for e in s.list("events") if e.get("reason") == "VGPUCdiDeviceUnresolved"], 10, "the CDI Event"
    )
    ((event,),) = [events]
    assert event["type"] == "Warning" and event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": NODE,
        "uid": NODE,
    }
    assert "2 device name(s)" in event["message"]
    assert "vgpu_plugin_cdi_unresolved_devices 2.0" in cluster.plugin.get("/metrics")[1]
    # The plugin still serves; the runtime would refuse the container.
    c = run_pod(cluster, "doomed", {NUMBER: 1, MEMORY: 1000})
    with pytest.raises(UnresolvableCdiDevices, match="unresolvable CDI devices nvidia.com/gpu=GPU-"):
        resolved(empty, c)
    # Once the spec is generated, the same names resolve (the check reads the directory again).
    write_spec(cluster.nvml, empty, strategies=["uuid"])
    resolved(empty, c)
    assert "vgpu_plugin_cdi_unresolved_devices 0.0" in cluster.plugin.get("/metrics")[1]


@pytest.mark.parametrize("names", ["uuid", "index"])
def test_mig_allocation_returns_its_mig_device_cdi_name(tmp_path, cluster_factory, names):  # noqa: F811
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    devices = [fakenvml.device(0), fakenvml.device(1)]
    cluster = cluster_factory(devices, node_config=MIG_NODE_CONFIG, env=cdi_env("cdi-cri", names, spec_dir))
    write_spec(cluster.nvml, spec_dir, strategies=[names])  # as the node's generator did before any MIG device
    c = run_pod(cluster, "mig", {NUMBER: 1, MEMORY: 8000}, annotations={keys.VGPU_MODE: "mig"})
    assert "NVIDIA_VISIBLE_DEVICES" not in c.envs and list(c.mounts) == []
    (name,) = c.cdi_devices
    if names == "uuid":
        assert name.startswith("nvidia.com/gpu=MIG-")
    else:
        gpu = [d["uuid"] for d in devices].index(assigned_uuid(cluster, "mig").split("[")[0])
        assert name.startswith(f"nvidia.com/gpu={gpu}:")
    # Dynamic MIG made the device after the spec was written: the plugin says so ...
    assert cluster.plugin.wait_for_log(f"are in no CDI spec under {spec_dir} ", 10)
    with pytest.raises(UnresolvableCdiDevices):
        resolved(spec_dir, c)
    # ... and a regenerated spec names it (docs/cdi.md §7).
    write_spec(cluster.nvml, spec_dir, strategies=[names])
    edits = resolved(spec_dir, c)
    assert edits.device_nodes


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEVICE_LIST_STRATEGY": "cdi"}, "device-list strategy 'cdi': must be one of envvar"),
        ({"CDI_KIND": "nvidia.com"}, "CDI kind 'nvidia.com': expected vendor/class"),
        ({"DEVICE_LIST_STRATEGY": "cdi-cri", "CDI_SPEC_DIRS": "cdi"}, "must be an absolute path"),
    ],
)
def test_bad_cdi_settings_exit_2_naming_the_value(two_gpus, plugin_factory, env, message):
    p: PluginProcess = plugin_factory(two_gpus, env=env)
    assert p.wait_exit(30) == 2
    assert message in p.log()
