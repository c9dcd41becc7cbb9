"""docs/health.md §8 and docs/metrics.md §10 end to end: the real `vgpu plugin` with the fake NVML,
the simulated API server and the Volcano scheduler emulator.

An XID withdraws the GPU from the register annotation, the emulator places no pod on it, a Warning
Event on the Node says which GPU and why; once the GPU recovers it is back and the emulator uses
it again.  The plugin's /metrics count the Allocates, their failures and the API writes.
"""

from __future__ import annotations

import grpc
import pytest

from tests.support.metrics_text import value
from vgpu.protocol import decode_register, keys
from vgpu.sim.kubelet.admission import pod_manifest
from vgpu.sim.processes import wait_until

from .conftest import MEMORY, NODE, NUMBER, UUID0, UUID1

NVML_ERROR_UNKNOWN = 999
RECOVERY = "nvidia:\n  healthRecoverySeconds: 1\n"


def _registered(cluster) -> list[str]:
    value_ = (cluster.node()["metadata"].get("annotations") or {}).get(keys.REGISTER)
    return [r.uuid for r in decode_register(value_)] if value_ else []


def _big(name: str):
    """One GPU with 50000 MiB: two of them never share an 80 GiB GPU."""
    return pod_manifest(name, [{"name": "c", "limits": {NUMBER: 1, MEMORY: 50000}}])


def test_unhealthy_gpu_is_withdrawn_no_pod_lands_on_it_and_it_returns_after_recovery(cluster_factory):
    cluster = cluster_factory(device_config=RECOVERY)
    assert cluster.plugin.wait_for_log("health checks running", 10)
    assert _registered(cluster) == [UUID0, UUID1]
    # A pod runs on one GPU (X) before it fails.
    cluster.create_pod(_big("running"))
    cluster.scheduler("master").schedule_once()
    assert cluster.admit("running").admitted
    x_uuid = cluster.annotations("running")[keys.VGPU_IDS_NEW].split(",", 1)[0]
    x, y_uuid = (0, UUID1) if x_uuid == UUID0 else (1, UUID0)
    running_before = cluster.annotations("running")

    # GPU X: an XID, and its recovery probe fails for now (memory info errors).
    dev = cluster.nvml.config["devices"][x]
    dev["errors"] = {"nvmlDeviceGetMemoryInfo": NVML_ERROR_UNKNOWN}
    dev.setdefault("xid_events", []).append(79)
    cluster.nvml.write()
    wait_until(lambda: _registered(cluster) == [y_uuid], 10, "GPU X withdrawn from the register annotation")
    (event,) = wait_until(lambda: cluster.events("VGPUDeviceUnhealthy"), 10, "the Node's Warning Event")
    assert event["type"] == "Warning"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": NODE}
    assert f"GPU {x} ({x_uuid}) is unhealthy: XidCriticalError 79; withdrawn from {keys.REGISTER}" in event["message"]

    # The emulator sees one GPU: the first new pod takes GPU Y, the second fits nowhere.
    cluster.create_pod(_big("a"))
    cluster.create_pod(_big("b"))
    out = {o.pod: o.node for o in cluster.scheduler("master").schedule_once()}
    assert out == {"default/a": NODE, "default/b": None}, out
    assert cluster.annotations("a")[keys.VGPU_IDS_NEW].startswith(y_uuid)
    assert keys.VGPU_IDS_NEW not in cluster.annotations("b")
    # (not admitted here: the kubelet's vgpu-memory pool lost GPU X's IDs too, docs/health.md §4)
    assert cluster.annotations("running") == running_before  # the pod on the failed GPU is not touched

    # The GPU answers again: back in the annotation, with the running pod's usage counted on it,
    # so the 50000 MiB pod still does not fit there until that pod is gone.
    dev["errors"] = {}
    cluster.nvml.write()
    wait_until(lambda: _registered(cluster) == [UUID0, UUID1], 10, "GPU X back in the register annotation")
    (back,) = wait_until(lambda: cluster.events("VGPUDeviceRecovered"), 10, "the Node's Normal Event")
    assert back["type"] == "Normal" and f"GPU {x} ({x_uuid}) is healthy again" in back["message"]
    out = {o.pod: o.node for o in cluster.scheduler("master").schedule_once()}
    assert out == {"default/b": None}, out
    cluster.admitter.release("default/running")
    cluster.store.delete("pods", "default", "running")
    out = {o.pod: o.node for o in cluster.scheduler("master").schedule_once()}
    assert out == {"default/b": NODE}, out
    assert cluster.annotations("b")[keys.VGPU_IDS_NEW].startswith(x_uuid)
    assert cluster.admit("b").admitted

    m = cluster.plugin.get("/metrics")[1]
    assert value(m, "vgpu_gpu_xid_events_total", uuid=x_uuid, index=str(x), xid="79") == 1
    assert value(m, "vgpu_gpu_healthy", uuid=x_uuid, index=str(x)) == 1


def test_report_policy_keeps_the_unhealthy_gpu_listed_with_health_false(cluster_factory):
    cluster = cluster_factory(env={"UNHEALTHY_GPU_POLICY": "report"})
    assert cluster.plugin.wait_for_log("health checks running", 10)
    cluster.nvml.add_xid(0, 79)
    reg = wait_until(
        lambda: ",false," in (r := cluster.node()["metadata"]["annotations"][keys.REGISTER]) and r, 10, "health=false"
    )
    assert [(r.uuid, r.health) for r in decode_register(reg)] == [(UUID0, False), (UUID1, True)]
    (event,) = wait_until(lambda: cluster.events("VGPUDeviceUnhealthy"), 10, "the Node's Warning Event")
    assert "kept in" in event["message"] and "health=false" in event["message"]


def test_metrics_after_an_allocate_and_after_a_failure(cluster):
    wait_until(lambda: cluster.plugin.get("/healthz")[0] == 200, 10, "ready", process=cluster.plugin)
    before = cluster.plugin.get("/metrics")[1]
    patches = value(before, "vgpu_plugin_api_writes_total", verb="patch", result="success")
    assert patches is not None and patches >= 1  # the register annotation
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 3000}}]))
    cluster.scheduler("master").schedule_once()
    assert cluster.admit("p").admitted
    # No pod waits for this one: the plugin refuses it (and says so in a Node Event).
    with pytest.raises(grpc.RpcError):
        cluster.kubelet.plugin(NUMBER).allocate([[f"{UUID1}-9"]])
    m = cluster.plugin.get("/metrics")[1]
    assert value(m, "vgpu_plugin_allocations_total", resource=NUMBER, result="success", reason="served") == 1
    assert value(m, "vgpu_plugin_allocations_total", resource=NUMBER, result="failure", reason="no_pod") == 1
    assert value(m, "vgpu_plugin_allocations_total", resource=MEMORY, result="success", reason="empty") == 1
    assert value(m, "vgpu_plugin_allocate_duration_seconds_count", resource=NUMBER) == 2
    assert value(m, "vgpu_plugin_api_writes_total", verb="patch", result="success") > patches  # bind-phase=success
    assert value(m, "vgpu_plugin_api_writes_total", verb="create", result="success") >= 1  # the Node Event
    assert value(m, "vgpu_plugin_api_writes_total", verb="patch", result="failure") == 0
