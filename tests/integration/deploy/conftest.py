"""Fixtures for the deployment end-to-end tests: the Volcano e2e cluster (simulated API server,
real `vgpu plugin`, fake kubelet, scheduler emulator) plus a real `vgpu monitor` process."""

from __future__ import annotations

import pathlib

import pytest

from tests.integration.volcano.conftest import NODE, apiserver, cluster, cluster_factory, hook_path  # noqa: F401
from vgpu.sim.processes import MonitorProcess, wait_until


@pytest.fixture
def monitor_factory(tmp_path: pathlib.Path):
    started: list[MonitorProcess] = []

    def make(cluster) -> MonitorProcess:  # noqa: F811 - a Cluster argument, not the re-exported fixture
        work = tmp_path / f"monitor{len(started)}"
        work.mkdir()
        kubeconfig = cluster.api.kubeconfig(work / "kubeconfig")
        mon = MonitorProcess(
            work,
            cluster.hook_path,
            kubeconfig,
            nvml_env=dict(cluster.nvml.env),
            node_name=NODE,
            extra_args=["--device-config", str(work / "absent-device-config.yaml")],
        )
        started.append(mon)
        mon.start(60)
        wait_until(lambda: mon.get("/healthz")[0] == 200, 60, "vgpu monitor /healthz", process=mon)
        return mon

    yield make
    for mon in started:
        mon.terminate()
        print(f"--- monitor log ({mon.log_path}) ---\n{mon.log()[-6000:]}")


DRIVER_UA = "vgpu-tests/deploy-driver"
"""User-Agent of the test's own API requests (scheduler emulator), told apart from the daemons'."""


def run_allocation_flow(cluster):  # noqa: F811 - a Cluster argument, not the re-exported fixture
    """Drive the plugin through its API-touching paths; returns the admitted container's result.

    Registration has happened (the fixture waited for it).  Then: a pod scheduled by the
    Volcano emulator with the node lock and admitted (Allocate success, annotation patches,
    lock release), and a pod nobody scheduled, twice (Allocate fails, the plugin posts an Event, then
    counts the repeat on it).
    """
    from tests.integration.volcano.conftest import MEMORY, NUMBER
    from vgpu.protocol import keys
    from vgpu.sim.kubelet.admission import pod_manifest

    cluster.core.api_client.user_agent = DRIVER_UA
    cluster.create_pod(pod_manifest("ok", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 1000}}]))
    out = cluster.scheduler("master", node_lock_enable=True).schedule_once()
    assert [o.node for o in out] == [NODE], out
    res = cluster.admit("ok")
    assert res.admitted, res.error
    wait_until(lambda: cluster.annotations("ok").get(keys.BIND_PHASE) == "success", 10, "bind-phase success")
    wait_until(
        lambda: keys.NODE_LOCK not in (cluster.node()["metadata"].get("annotations") or {}), 10, "node lock release"
    )
    cluster.create_pod(pod_manifest("stray", [{"name": "c", "limits": {NUMBER: 1}}]))
    assert not cluster.admit("stray").admitted
    wait_until(lambda: cluster.events(), 10, "an Event from the plugin")
    # The same failure again: the plugin counts it on the existing Event (a PATCH).
    assert not cluster.admit("stray").admitted
    wait_until(lambda: any(e.get("count", 1) > 1 for e in cluster.events()), 10, "the Event's count")
    return res.container("c")
