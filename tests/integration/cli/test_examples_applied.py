"""The examples `vgpu demo` does not run as a user would see them, applied to the scheduler
emulator on the simulated API server: the percentage request (it needs the scheduler's ConfigMap
to name the resource) and the Volcano Job's workers spread over two GPUs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from vgpu.protocol import RegisterRecord, decode_pod_devices, encode_register, keys
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.demo.pods import DEFAULT_EXAMPLES, load_example
from vgpu.sim.scheduler import VolcanoSchedulerEmulator
from vgpu.sim.scheduler.model import SchedulerConfig

U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"
A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"
PERCENTAGE = "volcano.sh/vgpu-memory-percentage"


@pytest.fixture
def api() -> Iterator[client.CoreV1Api]:
    server = ApiServer().start()
    c = server.api_client()
    try:
        reg = encode_register(
            [
                RegisterRecord(U0, 10, 81920, A100, True, "hami-core"),
                RegisterRecord(U1, 10, 81920, A100, True, "hami-core"),
            ]
        )
        server.store.create(
            "nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {keys.REGISTER: reg}}},
        )
        core = client.CoreV1Api(c)
        alloc = {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "163840", "volcano.sh/vgpu-cores": "200"}
        core.patch_node_status("n1", {"status": {"allocatable": alloc, "capacity": alloc}})
        core.store = server.store  # type: ignore[attr-defined]  # to create pods as the demo does
        yield core
    finally:
        c.close()
        server.stop()


def apply(api: client.CoreV1Api, name: str) -> list[str]:
    examples = load_example(DEFAULT_EXAMPLES / name)
    for e in examples:  # as `kubectl apply` sends them (the generated client refuses int quantities)
        api.store.create("pods", e.manifest, e.namespace)  # type: ignore[attr-defined]
    return [e.name for e in examples]


def devices(api: client.CoreV1Api, name: str):
    ann = api.read_namespaced_pod(name, "default").metadata.annotations or {}
    return decode_pod_devices(ann[keys.VGPU_IDS_NEW], annotation=keys.VGPU_IDS_NEW)


def test_memory_percentage_example_gets_a_quarter_of_the_card(api):
    (name,) = apply(api, "08-memory-percentage.yaml")
    VolcanoSchedulerEmulator(api, SchedulerConfig(memory_percentage_name=PERCENTAGE)).schedule_once()
    ((dev,),) = devices(api, name)
    assert dev.usedmem == 81920 // 4  # 20480 MiB, as the example says


def test_memory_percentage_without_the_configmap_name_asks_for_a_whole_card(api):
    """Why the demo skips it: from Volcano v1.13 without the ConfigMap the percentage is not read."""
    (name,) = apply(api, "08-memory-percentage.yaml")
    VolcanoSchedulerEmulator(api, SchedulerConfig()).schedule_once()
    ((dev,),) = devices(api, name)
    assert dev.usedmem == 81920


def test_volcano_job_workers_are_spread_over_two_gpus(api):
    names = apply(api, "06-volcano-job.yaml")
    assert names == ["vgpu-job-worker-0", "vgpu-job-worker-1"]
    VolcanoSchedulerEmulator(api, SchedulerConfig(policy="binpack")).schedule_once()
    got = [devices(api, n)[0][0] for n in names]
    assert {d.uuid for d in got} == {U0, U1}  # vgpu-podgroup-policy: spread
    assert all((d.usedmem, d.usedcores) == (4096, 5) for d in got)
