"""The container contract (docs/protocol.md §5.3, docs/hami-core.md §2–§3, docs/decisions.md decisions 5 and 7)."""

from __future__ import annotations

import random
import re
import uuid

import pytest

from tests.unit.hamicore.scenario import MIB, UUIDS
from vgpu.hamicore.contract import (
    ContainerContract,
    ContractError,
    DeviceGrant,
    Mount,
    build_container_contract,
    cuda_disable_control_is_true,
    pod_task_priority,
)
from vgpu.hamicore.limits import limits_from_env, parse_limit
from vgpu.hamicore.paths import HostLayout, parse_container_dir_name
from vgpu.hamicore.region import read_region
from vgpu.sim.hamicore.writer import RegionWriter

POD = "7f3c1a52-9d2e-4b7a-8c1e-0a1b2c3d4e5f"
CACHE = "0b5d5f36-2f0e-4c4e-9a55-6f3f2b7c1d10"


def build(**kw) -> ContainerContract:
    args = dict(
        devices=[DeviceGrant(UUIDS[0], 3000, 50), DeviceGrant(UUIDS[1], 2048, 30)],
        pod_uid=POD,
        container_name="trainer",
        cache_uuid=CACHE,
    )
    args.update(kw)
    return build_container_contract(**args)


def test_env_and_mounts_for_two_devices():
    c = build()
    assert c.envs == {
        "NVIDIA_VISIBLE_DEVICES": f"{UUIDS[0]},{UUIDS[1]}",
        "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "2048m",
        "CUDA_DEVICE_SM_LIMIT": "50",
        "CUDA_DEVICE_SM_LIMIT_0": "50",
        "CUDA_DEVICE_SM_LIMIT_1": "30",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": f"/tmp/vgpu/{CACHE}.cache",
    }
    cdir = f"/usr/local/vgpu/containers/{POD}_trainer"
    assert c.mounts == [
        Mount("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so", True),
        Mount("/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", True),
        Mount("/tmp/vgpu", cdir, False),
        Mount("/tmp/vgpulock", "/tmp/vgpulock", False),
    ]
    assert c.host_cache_dir == cdir
    assert c.host_cache_file == f"{cdir}/{CACHE}.cache"
    assert c.cache_file == f"/tmp/vgpu/{CACHE}.cache"
    assert c.preload_mounted and c.zero_memory_devices == ()


def test_only_the_cache_directory_is_writable():
    # H-9: libvgpu.so and ld.so.preload are read-only file mounts; HAMi#2114.
    c = build()
    assert [m.container_path for m in c.mounts if not m.read_only] == ["/tmp/vgpu", "/tmp/vgpulock"]


def test_host_cache_dir_is_one_place_for_plugin_and_monitor():
    c = build(hook_path="/var/lib/vgpu/")
    layout = HostLayout("/var/lib/vgpu")
    assert c.host_cache_dir == layout.container_dir(POD, "trainer") == f"/var/lib/vgpu/containers/{POD}_trainer"
    assert parse_container_dir_name(c.host_cache_dir.rsplit("/", 1)[1]) == (POD, "trainer")
    assert c.mounts[0].host_path == "/var/lib/vgpu/libvgpu.so"
    assert c.mounts[0].container_path == "/usr/local/vgpu/libvgpu.so"  # always, whatever HOOK_PATH is


@pytest.mark.parametrize("value", ["1", "t", "T", "TRUE", "true", "True"])
def test_cuda_disable_control_true_drops_only_the_preload_mount(value):
    c = build(cuda_disable_control=value)
    assert not c.preload_mounted
    assert "/etc/ld.so.preload" not in [m.container_path for m in c.mounts]
    assert len(c.mounts) == 3


@pytest.mark.parametrize("value", [None, "", "0", "false", "no", "yes", "on", " true", "tRUE", "2"])
def test_cuda_disable_control_not_parsebool_true_keeps_the_preload(value):
    assert not cuda_disable_control_is_true(value)
    assert build(cuda_disable_control=value).preload_mounted


@pytest.mark.parametrize("policy,env", [("default", None), ("force", "force"), ("disable", "disable")])
def test_gpu_core_policy(policy, env):
    # H-2: force makes a lone pod obey its core limit.
    assert build(gpu_core_policy=policy).envs.get("GPU_CORE_UTILIZATION_POLICY") == env


def test_lib_cuda_log_level_only_when_configured():
    assert "LIBCUDA_LOG_LEVEL" not in build().envs
    assert build(lib_cuda_log_level=0).envs["LIBCUDA_LOG_LEVEL"] == "0"
    assert build(lib_cuda_log_level=4).envs["LIBCUDA_LOG_LEVEL"] == "4"


def test_no_cores_emits_zero_which_means_unlimited():
    # H-3: CUDA_DEVICE_SM_LIMIT=0 is stored as 100 by HAMi-core.
    c = build(devices=[DeviceGrant(UUIDS[0], 1000, 0)])
    assert c.envs["CUDA_DEVICE_SM_LIMIT"] == "0" and c.envs["CUDA_DEVICE_SM_LIMIT_0"] == "0"
    assert limits_from_env(c.envs)[1][0] == 100


def test_zero_memory_is_emitted_and_flagged():
    c = build(devices=[DeviceGrant(UUIDS[0], 0, 10), DeviceGrant(UUIDS[1], 5, 10)])
    assert c.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "0m"
    assert c.zero_memory_devices == (0,)


def test_memory_factor_multiplies():
    c = build(devices=[DeviceGrant(UUIDS[0], 300, 10)], memory_factor=10)
    assert c.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == "3000m"


def test_limit_strings_never_hit_the_parser_traps():
    # H-4: property over usedmem × factor: plain decimal, lowercase m, no leading zero, no "Gi".
    rng = random.Random(4)
    for _ in range(2000):
        mem = rng.choice([0, 1, 7, 8, 10, 64, 1023, 1024, 81920, rng.randrange(0, 2**20)])
        factor = rng.choice([1, 2, 10, 1024])
        cores = rng.randrange(0, 101)
        c = build(devices=[DeviceGrant(UUIDS[0], mem, cores)], memory_factor=factor)
        value = c.envs["CUDA_DEVICE_MEMORY_LIMIT_0"]
        assert re.fullmatch(r"(0|[1-9][0-9]*)m", value), value
        assert re.fullmatch(r"0|[1-9][0-9]*", c.envs["CUDA_DEVICE_SM_LIMIT_0"])
        assert parse_limit(value) == mem * factor * MIB  # what HAMi-core will enforce


def test_every_allocate_gets_a_new_cache_file():
    # H-6: a new UUIDv4 per Allocate, so new limits always apply.
    a = build_container_contract(devices=[DeviceGrant(UUIDS[0], 1, 1)], pod_uid=POD, container_name="c")
    b = build_container_contract(devices=[DeviceGrant(UUIDS[0], 1, 1)], pod_uid=POD, container_name="c")
    assert a.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] != b.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"]
    name = a.cache_file.removeprefix("/tmp/vgpu/").removesuffix(".cache")
    assert uuid.UUID(name).version == 4
    assert a.host_cache_dir == b.host_cache_dir


def test_the_contract_env_yields_the_intended_limits_in_a_region(tmp_path):
    """Round trip: what libvgpu would stamp from our env is exactly the allocation."""
    c = build()
    path = tmp_path / c.cache_file.rsplit("/", 1)[1]
    with RegionWriter.create(path, "v1.2", env=c.envs) as w:
        w.init_devices(UUIDS)
    snap = read_region(path)
    assert snap.limits[:2] == (3000 * MIB, 2048 * MIB) and snap.limits[2:] == (0,) * 14
    assert snap.sm_limits[:2] == (50, 30) and snap.sm_limits[2:] == (50,) * 14
    assert snap.priority == 1  # we never set CUDA_TASK_PRIORITY


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"devices": []}, "at least one GPU"),
        ({"devices": [DeviceGrant(UUIDS[0], 1, 1)] * 2}, "listed twice"),
        ({"devices": [DeviceGrant(f"GPU-{i}", 1, 1) for i in range(17)]}, "at most 16"),
        ({"devices": [DeviceGrant("GPU-a,GPU-b", 1, 1)]}, "devices[0].uuid"),
        ({"devices": [DeviceGrant("", 1, 1)]}, "devices[0].uuid"),
        ({"devices": [DeviceGrant(UUIDS[0], -1, 1)]}, "devices[0].memory_mib"),
        ({"devices": [DeviceGrant(UUIDS[0], 1.5, 1)]}, "devices[0].memory_mib"),
        ({"devices": [DeviceGrant(UUIDS[0], 1, True)]}, "devices[0].cores"),
        ({"memory_factor": 0}, "memory_factor"),
        ({"gpu_core_policy": "Force"}, "gpuCorePolicy"),
        ({"lib_cuda_log_level": -1}, "libCudaLogLevel"),
        ({"pod_uid": "not-a-uid"}, "pod UID"),
        ({"container_name": "Bad_Name"}, "DNS-1123"),
        ({"cache_uuid": "../../etc/passwd"}, "cache_uuid"),
        ({"hook_path": "relative/path"}, "hook_path"),
    ],
)
def test_bad_input_names_the_field(kw, needle):
    with pytest.raises(ContractError) as info:
        build(**kw)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    "env, expected",
    [
        ([{"name": "CUDA_TASK_PRIORITY", "value": "0"}], 0),
        ([{"name": "CUDA_TASK_PRIORITY", "value": "-2147483648"}], -(2**31)),
        ([{"name": "CUDA_TASK_PRIORITY", "value": "4294967297"}], 1),  # C int wrap, as libvgpu's atoi
        ([{"name": "CUDA_TASK_PRIORITY", "value": " 5 apples"}], 5),
        ([{"name": "CUDA_TASK_PRIORITY", "value": "high"}], 0),
        ([{"name": "CUDA_TASK_PRIORITY", "value": ""}], 1),  # empty: libvgpu's default
        ([{"name": "CUDA_TASK_PRIORITY"}], 1),  # no value: the kubelet sets it empty
        ([{"name": "CUDA_TASK_PRIORITY", "value": "0"}, {"name": "CUDA_TASK_PRIORITY", "value": "3"}], 3),  # last wins
        ([{"name": "OTHER", "value": "0"}], None),  # not in the spec: envFrom or the image may set it
        ([{"name": "CUDA_TASK_PRIORITY", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}], None),
        ([{"name": "P", "value": "0"}, {"name": "CUDA_TASK_PRIORITY", "value": "$(P)"}], None),  # kubelet expands
        ([{"name": "CUDA_TASK_PRIORITY", "value": 0}], None),  # not a string: not what the API server stores
    ],
)
def test_pod_task_priority_is_what_libvgpu_will_stamp_when_the_spec_decides_it(env, expected):
    # docs/metrics.md §5.1: the monitor's trusted priority; the sim writer stamps the same value.
    assert pod_task_priority({"name": "main", "env": env}) == expected
    assert pod_task_priority({"name": "main"}) is None
