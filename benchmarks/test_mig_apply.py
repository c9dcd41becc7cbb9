"""Applying a 7-instance MIG layout (group1 = 7 × 1g.10gb on an A100-SXM4-80GB): the cffi path
(``MigManager.apply`` over ``vgpu.nvml.mig_calls``) vs the same NVML calls through pynvml.

The baseline issues exactly the NVML calls the cffi path makes, in the same order (the CI
profile id is asked once, as the cffi side caches it), so each ratio is the per-call and
bookkeeping overhead the project controls.  Two measurements:

- **steady state**: the layout is already there, as for every Allocate after the first on a
  GPU — read the layout (7 × ``GetGpuInstances``, per GI its info, CI list and CI info), change
  nothing, resolve the 7 MIG UUIDs (``GetMaxMigDeviceCount`` + 4 calls per MIG device).
  Only reads: the call overhead is what is measured.  The cffi side reads the layout and the
  MIG devices with one C call each (``vnv_mig_read_instances`` / ``vnv_mig_devices``: the same
  NVML calls in the same order, looped in C) and reuses unchanged result objects; measured
  ~1.3–1.4× pynvml (was 0.6× with one cffi call per NVML call).  The fake NVML's own cost per
  call, paid alike by both sides, caps the ratio near 2×.  Gate: ``mig.apply_steady_state``.
- **from empty**: create the 7 GPU and compute instances and destroy them again.  Every
  create/destroy in the fake NVML is a locked rewrite of its MIG state file, paid alike by
  both sides, so the ratio is ~0.8–1.2 and the gate (``mig.apply_from_empty``) only says
  planning adds no measurable cost.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from ctypes import byref, c_uint

import pynvml
import pytest

from benchmarks.conftest import ratio_gate, rounds
from vgpu.config.device_config import default_device_config
from vgpu.config.loader import effective_config
from vgpu.config.model import NodeConfig
from vgpu.mig import MigManager
from vgpu.nvml.device import GpuInfo
from vgpu.nvml.library import init_pynvml
from vgpu.nvml.mig_calls import NVML_DEVICE_MIG_ENABLE
from vgpu.sim.nvml import fakenvml

UUID = "GPU-00000000-6888-5063-1e4d-f2a09cfbf000"
NAME = "NVIDIA A100-SXM4-80GB"
CAP = 64


@pytest.fixture
def a100(tmp_path, monkeypatch):
    fake = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0, name=NAME, mig_mode=True)])
    # The MIG state file on tmpfs when there is one: both sides rewrite it per create/destroy,
    # and disk noise from other processes would swamp the call overhead being compared.
    shm = pathlib.Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        fake.state_path = pathlib.Path(tempfile.mkdtemp(prefix="vgpu-mig-bench-", dir=shm)) / "fakenvml.state"
    for key, value in fake.env.items():
        monkeypatch.setenv(key, value)
    init_pynvml(str(fake.library))
    cfg = effective_config(default_device_config(), NodeConfig(name="n1", operating_mode="mig"))
    gpu = GpuInfo(0, UUID, NAME, 81920, 0, "00000000:07:00.0", 0, (8, 0), True, True)
    manager = MigManager.open(str(fake.library), cfg, [gpu])
    try:
        assert manager.nvml.get_mig_mode(manager.handle(UUID))[0] == NVML_DEVICE_MIG_ENABLE
        yield manager
    finally:
        manager.close()
        pynvml.nvmlShutdown()
        if fake.state_path.parent != fake.config_path.parent:
            shutil.rmtree(fake.state_path.parent, ignore_errors=True)


class CffiRound:
    def __init__(self, manager: MigManager) -> None:
        self.m = manager
        self.gpu = manager.gpu(UUID)
        self.profile_ids = [p.profile_id for p in self.gpu.catalog.profiles]

    def apply(self) -> list[str]:
        return [d.mig_uuid for d in self.m.apply(UUID, "group1").devices]

    def teardown(self) -> None:
        nvml, h = self.m.nvml, self.m.handle(UUID)
        for pid in self.profile_ids:
            for gi in nvml.gpu_instances(h, pid):
                for ci in nvml.compute_instances(gi, self.ci_profile_id(gi, pid)):
                    nvml.destroy_compute_instance(ci)
                nvml.destroy_gpu_instance(gi)

    def ci_profile_id(self, gi, pid: int) -> int:
        profile = self.gpu.catalog.by_id(pid)
        return self.gpu.ci_profiles.full(self.m.nvml, gi, profile).profile_id

    def round(self) -> list[str]:
        uuids = self.apply()
        self.teardown()
        return uuids


class PynvmlRound:
    """The same NVML calls as the cffi path, written against nvidia-ml-py."""

    def __init__(self, manager: MigManager) -> None:
        gpu = manager.gpu(UUID)
        self.profile_ids = [p.profile_id for p in gpu.catalog.profiles]
        self.ci_profiles = {p.profile_id: p.ci_constant for p in gpu.catalog.profiles}
        self.plan = [(i.profile.profile_id, i.placement.start, i.placement.size) for i in gpu.plans["group1"].instances]
        self.ci_ids: dict[int, int] = {}
        self.gis = (pynvml.c_nvmlGpuInstance_t * CAP)()
        self.cis = (pynvml.c_nvmlComputeInstance_t * CAP)()

    def _gpu_instances(self, h, pid: int) -> list:
        n = c_uint(CAP)
        pynvml.nvmlDeviceGetGpuInstances(h, pid, self.gis, byref(n))
        return [self.gis[k] for k in range(n.value)]

    def _compute_instances(self, gi, ci_pid: int) -> list:
        n = c_uint(CAP)
        pynvml.nvmlGpuInstanceGetComputeInstances(gi, ci_pid, self.cis, byref(n))
        return [self.cis[k] for k in range(n.value)]

    def _ci_profile_id(self, gi, pid: int) -> int:
        if pid not in self.ci_ids:
            self.ci_ids[pid] = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, self.ci_profiles[pid], 0).id
        return self.ci_ids[pid]

    def apply(self) -> list[str]:
        h = pynvml.nvmlDeviceGetHandleByUUID(UUID)
        present = {}
        for pid in self.profile_ids:  # read the current layout
            for gi in self._gpu_instances(h, pid):
                info = pynvml.nvmlGpuInstanceGetInfo(gi)
                cis = [
                    pynvml.nvmlComputeInstanceGetInfo(ci).id
                    for ci in self._compute_instances(gi, self._ci_profile_id(gi, pid))
                ]
                present[(pid, info.placement.start)] = (info.id, cis[0] if cis else None)
        ids = []
        for pid, start, size in self.plan:
            if (pid, start) in present:  # already there (the steady state)
                ids.append(present[(pid, start)])
                continue
            gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(
                h, pid, byref(pynvml.c_nvmlGpuInstancePlacement_t(start, size))
            )
            gi_id = pynvml.nvmlGpuInstanceGetInfo(gi).id
            pynvml.nvmlGpuInstanceGetInfo(gi)  # the cffi side re-reads the new GI
            ci_pid = self._ci_profile_id(gi, pid)
            self._compute_instances(gi, ci_pid)
            ci = pynvml.nvmlGpuInstanceCreateComputeInstance(gi, ci_pid)
            ids.append((gi_id, pynvml.nvmlComputeInstanceGetInfo(ci).id))
        uuids = {}
        for i in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
            except pynvml.NVMLError_NotFound:
                continue
            uuids[(pynvml.nvmlDeviceGetGpuInstanceId(m), pynvml.nvmlDeviceGetComputeInstanceId(m))] = (
                pynvml.nvmlDeviceGetUUID(m)
            )
        return [uuids[k] for k in ids]

    def teardown(self) -> None:
        h = pynvml.nvmlDeviceGetHandleByUUID(UUID)
        for pid in self.profile_ids:
            for gi in self._gpu_instances(h, pid):
                for ci in self._compute_instances(gi, self._ci_profile_id(gi, pid)):
                    pynvml.nvmlComputeInstanceDestroy(ci)
                pynvml.nvmlGpuInstanceDestroy(gi)

    def round(self) -> list[str]:
        uuids = self.apply()
        self.teardown()
        return uuids


def test_steady_state_apply_cffi_vs_pynvml(benchmark, a100):
    """The layout is already there: read it, change nothing, resolve the 7 MIG UUIDs."""
    fast, slow = CffiRound(a100), PynvmlRound(a100)
    first = fast.apply()
    assert slow.apply() == first and fast.apply() == first and len(set(first)) == 7
    ratio_gate(
        benchmark,
        fast.apply,
        slow.apply,
        "mig.apply_steady_state",
        n=rounds(400),
        interleave=True,
        what="MIG apply of a 7-instance layout already in place (cffi vs pynvml)",
    )


def test_apply_from_empty_cffi_vs_pynvml(benchmark, a100):
    """Create the 7 instances on an empty GPU, then destroy them again."""
    fast, slow = CffiRound(a100), PynvmlRound(a100)
    assert fast.round() == slow.round()
    assert len(set(fast.round())) == 7
    ratio_gate(
        benchmark,
        fast.round,
        slow.round,
        "mig.apply_from_empty",
        n=rounds(60),
        interleave=True,
        what="MIG apply of 7 instances on an empty GPU + teardown (cffi vs pynvml)",
    )
