"""prepare_container: the one host-side call of a hami-core Allocate (vgpu/hamicore/host.py)."""

from __future__ import annotations

import pathlib

import pytest

from vgpu.hamicore.contract import DeviceGrant
from vgpu.hamicore.host import ContainerPrepareError, prepare_container
from vgpu.hamicore.paths import HostLayout

POD = "6f1c7d2e-0d2b-4a53-9d51-2b3c4d5e6f70"
GPU = "GPU-00000000-1111-2222-3333-444444444444"


def layout(tmp_path: pathlib.Path, *, files: bool = True) -> HostLayout:
    hook = tmp_path / "hook"
    hook.mkdir()
    if files:
        (hook / "libvgpu.so").write_bytes(b"x")
        (hook / "ld.so.preload").write_text("/usr/local/vgpu/libvgpu.so")
    return HostLayout(hook_path=str(hook), vgpulock_dir=str(tmp_path / "vgpulock"))


def prepare(lay: HostLayout, devices: list[DeviceGrant]):
    return prepare_container(
        lay,
        devices=devices,
        pod_uid=POD,
        container_name="main",
        cuda_disable_control=None,
        gpu_core_policy="default",
        lib_cuda_log_level=None,
        memory_factor=1,
    )


def test_contract_and_host_directories(tmp_path):
    lay = layout(tmp_path)
    contract = prepare(lay, [DeviceGrant(GPU, 1000, 30)])
    assert contract.envs["NVIDIA_VISIBLE_DEVICES"] == GPU
    assert pathlib.Path(contract.host_cache_dir).is_dir() and pathlib.Path(lay.vgpulock_dir).is_dir()


def test_missing_files_are_named_before_anything_else(tmp_path):
    lay = layout(tmp_path, files=False)
    with pytest.raises(ContainerPrepareError, match="HAMi-core files missing under"):
        prepare(lay, [DeviceGrant(GPU, 1000, 0), DeviceGrant(GPU, 1000, 0)])  # a bad contract too


def test_a_refused_contract_leaves_nothing_on_the_host(tmp_path):
    lay = layout(tmp_path)
    with pytest.raises(ContainerPrepareError, match="cannot prepare HAMi-core for container main: .*listed twice"):
        prepare(lay, [DeviceGrant(GPU, 1000, 0), DeviceGrant(GPU, 1000, 0)])
    assert not pathlib.Path(lay.containers_root).exists() and not pathlib.Path(lay.vgpulock_dir).exists()
