"""The plugin's HTTP endpoint (docs/metrics.md §10) on the real `vgpu plugin` process: /livez,
/healthz before and after the kubelet registration, /metrics after Allocates, and the GPU health
metrics after an XID injected through the fake NVML."""

from __future__ import annotations

import grpc
import pytest

from tests.support.metrics_text import value
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.processes import wait_until

from .conftest import NAMES, PluginProcess

NUMBER, MEMORY, CORES = NAMES
NVML_ERROR_UNKNOWN = 999


def test_healthz_is_503_until_registered_then_200_and_counters_exist_at_zero(socket_dir, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)  # no kubelet yet
    assert p.get("/livez") == (200, "ok\n")
    # Started (NVML up, servers built) but no kubelet to register with: only that is missing.
    status, body = wait_until(
        lambda: (s := p.get("/healthz"))[1].startswith("not ready: not registered with the kubelet at") and s,
        30,
        "/healthz naming the missing registration",
        process=p,
    )
    assert status == 503 and all(name in body for name in NAMES), body
    m = p.get("/metrics")[1]
    for name in NAMES:
        assert value(m, "vgpu_plugin_registered", resource=name) in (0, None)
    kubelet = FakeKubelet(socket_dir).start()
    try:
        kubelet.wait_for_plugins(NAMES, timeout=30)
        status, body = wait_until(lambda: (s := p.get("/healthz"))[0] == 200 and s, 10, "/healthz 200", process=p)
        assert body == f"ok: {', '.join(NAMES)} registered with the kubelet; NVML up\n"
        m = p.get("/metrics")[1]
        for name in NAMES:
            assert value(m, "vgpu_plugin_registered", resource=name) == 1
            # every (result, reason) of every resource, at zero, before any Allocate
            for reason in ("served", "empty"):
                assert value(m, "vgpu_plugin_allocations_total", resource=name, result="success", reason=reason) == 0
            for reason in ("no_pod", "unhealthy_gpu", "invalid_request", "api_write", "no_api_access", "internal"):
                assert value(m, "vgpu_plugin_allocations_total", resource=name, result="failure", reason=reason) == 0
            assert value(m, "vgpu_plugin_allocate_duration_seconds_count", resource=name) == 0
        assert value(m, "vgpu_plugin_devices", resource=NUMBER, health="healthy") == 20  # 2 GPUs x split 10
        assert value(m, "vgpu_plugin_devices", resource=NUMBER, health="unhealthy") == 0
        assert value(m, "vgpu_plugin_kubelet_restarts_total") == 0
        assert value(m, "vgpu_plugin_nvml_up") == 1
        for verb in ("create", "patch"):
            for result in ("success", "failure"):
                assert value(m, "vgpu_plugin_api_writes_total", verb=verb, result=result) == 0
        assert value(m, "vgpu_build_info", daemon="plugin", driver_version="550.54.15", hamicore_commit="unknown") == 1
        # A kubelet restart: seen, counted, registered again.
        kubelet.stop()
        kubelet = FakeKubelet(socket_dir).start()
        kubelet.wait_for_plugins(NAMES, timeout=30)
        wait_until(lambda: value(p.get("/metrics")[1], "vgpu_plugin_kubelet_restarts_total") == 1, 10, "restart seen")
        wait_until(lambda: p.get("/healthz")[0] == 200, 10, "ready again", process=p)
    finally:
        kubelet.stop()


def test_metrics_after_an_allocate_and_after_a_failure(kubelet, two_gpus, plugin_factory):
    """Without API access: vgpu-memory answers empty (success), vgpu-number refuses (failure)."""
    p = plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    mem_id = clients[MEMORY].devices[0][0]
    clients[MEMORY].allocate([[mem_id]])
    with pytest.raises(grpc.RpcError):
        clients[NUMBER].allocate([[clients[NUMBER].devices[0][0]]])
    m = p.get("/metrics")[1]
    assert value(m, "vgpu_plugin_allocations_total", resource=MEMORY, result="success", reason="empty") == 1
    assert value(m, "vgpu_plugin_allocations_total", resource=NUMBER, result="failure", reason="no_api_access") == 1
    assert value(m, "vgpu_plugin_allocations_total", resource=NUMBER, result="success", reason="served") == 0
    assert value(m, "vgpu_plugin_allocate_duration_seconds_count", resource=NUMBER) == 1
    assert value(m, "vgpu_plugin_allocate_duration_seconds_bucket", resource=MEMORY, le="+Inf") == 1
    assert p.get("/healthz")[0] == 200  # a refused Allocate is not a readiness problem
    assert p.get("/nope")[0] == 404


def test_xid_counts_and_health_gauges_after_an_injected_xid(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running", 10)
    u0, u1 = (d["uuid"] for d in two_gpus.config["devices"])
    m = p.get("/metrics")[1]
    assert value(m, "vgpu_gpu_healthy", uuid=u0, index="0") == 1
    assert value(m, "vgpu_gpu_xid_events_total", uuid=u0, index="0", xid="79") == 0  # present before any event
    started = value(m, "vgpu_gpu_health_changed_timestamp_seconds", uuid=u0, index="0")
    assert started is not None and started > 0

    two_gpus.add_xid(0, 79)  # fatal: GPU 0 unhealthy
    two_gpus.add_xid(1, 13)  # ignored by the default policy: counted, GPU 1 stays healthy
    m = wait_until(
        lambda: (
            (b := p.get("/metrics")[1])
            and value(b, "vgpu_gpu_xid_events_total", uuid=u1, index="1", xid="13") == 1
            and value(b, "vgpu_gpu_xid_events_total", uuid=u0, index="0", xid="79") == 1
            and b
        ),
        10,
        "both XIDs counted",
        process=p,
    )
    assert value(m, "vgpu_gpu_healthy", uuid=u0, index="0") == 0
    assert value(m, "vgpu_gpu_healthy", uuid=u1, index="1") == 1
    assert value(m, "vgpu_gpu_health_changed_timestamp_seconds", uuid=u0, index="0") > started
    assert value(m, "vgpu_gpu_health_changed_timestamp_seconds", uuid=u1, index="1") == started
    assert value(m, "vgpu_plugin_devices", resource=NUMBER, health="unhealthy") == 10
    assert value(m, "vgpu_plugin_devices", resource=NUMBER, health="healthy") == 10
    assert all(h == "Unhealthy" for i, h in clients[NUMBER].devices if i.startswith(u0))


def test_healthz_is_503_while_the_nvml_event_wait_fails(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)
    kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running", 10)
    wait_until(lambda: p.get("/healthz")[0] == 200, 10, "ready", process=p)
    two_gpus.config["errors"] = {"nvmlEventSetWait": NVML_ERROR_UNKNOWN}
    two_gpus.write()
    # The loop is inside a 5 s wait; the error shows when that wait returns.
    status, body = wait_until(lambda: (s := p.get("/healthz"))[0] == 503 and s, 8, "/healthz 503", process=p)
    assert "NVML event wait failing" in body, body
    assert value(p.get("/metrics")[1], "vgpu_plugin_nvml_up") == 0
    two_gpus.config["errors"] = {}
    two_gpus.write()
    wait_until(lambda: p.get("/healthz")[0] == 200, 10, "ready again", process=p)


@pytest.mark.parametrize(
    ("flag", "bad", "message"),
    [
        ("--metrics-listen", "localhost:http", "--metrics-listen 'localhost:http': port 'http' is not a number"),
        ("--unhealthy-gpu-policy", "maybe", "--unhealthy-gpu-policy 'maybe': expected one of withdraw, report"),
    ],
)
def test_a_bad_endpoint_or_policy_setting_is_a_config_error(tmp_path, socket_dir, two_gpus, flag, bad, message):
    p = PluginProcess(tmp_path, socket_dir, two_gpus)
    if flag in p.args:
        p.args[p.args.index(flag) + 1] = bad
    else:
        p.args += [flag, bad]
    try:
        p.start()
        assert p.wait_exit(30) == 2
        assert message in p.log()
    finally:
        p.terminate()
