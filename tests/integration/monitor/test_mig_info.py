"""``hami_mig_device_info`` from the real monitor: MIG identities of an allocated pod (docs/metrics.md §3).

The MIG layout is applied by the plugin's own MIG manager in a child process (the fake NVML
keeps MIG state in its state file, shared by every process on that configuration); the monitor
then resolves the pod's ``vgpu-ids-new`` slots to the same instances.
"""

from __future__ import annotations

from typing import Any

from tests.integration.mig.conftest import mig_node  # noqa: F401 - the fixture, reused
from tests.unit.monitor.helpers import one, parse, wait_until
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.processes import MonitorProcess

G0 = "GPU-00000000-6888-5063-1e4d-f2a09cfbf000"
NUM = "volcano.sh/vgpu-number"


def mig_pod(apiserver: ApiServer, name: str, ids: str, phase: str = "success") -> dict[str, Any]:
    containers = [
        {"name": "init-free", "image": "x"},  # no vGPU: not a segment
        {"name": "trainer", "image": "x", "resources": {"limits": {NUM: "1"}}},
        {"name": "helper", "image": "x", "resources": {"limits": {NUM: "1"}}},
    ]
    apiserver.store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ml",
                "annotations": {
                    "volcano.sh/vgpu-ids-new": ids,
                    "volcano.sh/bind-phase": phase,
                    "volcano.sh/vgpu-node": "node-1",
                },
            },
            "spec": {"nodeName": "node-1", "containers": containers},
        },
        "ml",
    )
    return apiserver.store.patch("pods", "ml", name, {"status": {"phase": "Running"}}, "merge", subresource="status")


def test_mig_identities_of_an_allocated_pod(mig_node, apiserver, kubeconfig, hook, tmp_path):  # noqa: F811
    fake, child = mig_node()
    child.call("apply(0, 'group2')")  # 2g.20gb x3 + 1g.10gb, as the plugin's Allocate would
    expected = {pos: child.call(f"lookup(0, 'group2', {pos})") for pos in (1, 3)}
    ids = f"{G0}[group2-3],NVIDIA,8000,0:;{G0}[group2-1],NVIDIA,20000,0:{G0}[group9-0],NVIDIA,1,0:"
    mig_pod(apiserver, "mig-job", ids)
    mig_pod(apiserver, "not-yet", f"{G0}[group2-0],NVIDIA,20000,0:", phase="allocating")
    mon = MonitorProcess(tmp_path, hook, kubeconfig, nvml_env=fake.env)
    try:
        mon.start()
        s = wait_until(lambda: (p := parse(mon.scrape())).get("hami_mig_device_info") and p, 10, "MIG info")
        rows = s["hami_mig_device_info"]
        assert len(rows) == 2  # group9 cannot be resolved: skipped; the allocating pod is not exported
        for ctr, vdev, pos in (("trainer", "0", 3), ("helper", "0", 1)):
            e = expected[pos]
            assert (
                one(
                    s,
                    "hami_mig_device_info",
                    namespace="ml",
                    pod="mig-job",
                    container=ctr,
                    vdevice_index=vdev,
                    device_uuid=G0,
                    mig_uuid=e["uuid"],
                    profile=e["profile"],
                    gpu_instance_id=str(e["gi"]),
                    compute_instance_id=str(e["ci"]),
                    zone="vGPU",
                )
                == 1
            )
        assert {lab["profile"] for lab, _ in rows} == {"1g.10gb", "2g.20gb"}
        # utilization is NOT_SUPPORTED on a MIG-enabled GPU (HAMi#1089): omitted, memory still there
        assert "HostCoreUtilization" not in s and len(s["HostGPUMemoryUsage"]) == 1
    finally:
        mon.terminate()
        print(mon.log()[-4000:])
