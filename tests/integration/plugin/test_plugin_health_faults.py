"""docs/health.md §7 against the real `vgpu plugin` process, with faults injected into the fake
NVML (its ``errors`` keys make one NVML function return a given nvmlReturn_t)."""

from __future__ import annotations

import signal
import time

from .conftest import NAMES

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_UNKNOWN = 999


def _unhealthy_gpus(client, uuids) -> set[int]:
    """Numbers n of the GPUs with Unhealthy devices; GPU n has UUID uuids[n] and minor n."""
    bad = set()
    for i, h in client.devices:
        if h == "Unhealthy":
            bad.add(next(n for n, u in enumerate(uuids) if i.startswith((u, f"{n}-"))))
    return bad


def test_event_set_create_failure_exits_non_zero(two_gpus, plugin_factory):
    """docs/failures.md X-4: never run as a zombie that advertises unwatched GPUs."""
    two_gpus.config["errors"] = {"nvmlEventSetCreate": NVML_ERROR_UNKNOWN}
    two_gpus.write()
    p = plugin_factory(two_gpus)
    assert p.wait_exit(30) == 1
    assert "nvmlEventSetCreate failed" in p.log()


def test_register_events_not_supported_keeps_the_gpu_healthy_and_logs_once(kubelet, two_gpus, plugin_factory):
    two_gpus.update_device(1, errors={"nvmlDeviceRegisterEvents": NVML_ERROR_NOT_SUPPORTED})
    p = plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running for 2 GPU(s) (1 with events)", 10)
    uuid1 = two_gpus.config["devices"][1]["uuid"]
    assert p.log().count(f"Device {uuid1} is too old to support healthchecking.") == 1
    assert all(h == "Healthy" for c in clients.values() for _, h in c.devices)


def test_wait_error_marks_all_gpus_unhealthy_without_spinning(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running", 10)
    uuids = [d["uuid"] for d in two_gpus.config["devices"]]
    two_gpus.config["errors"] = {"nvmlEventSetWait": NVML_ERROR_UNKNOWN}
    two_gpus.write()
    # The loop is inside a 5 s wait; the fake re-reads its file while blocking, so the error
    # shows at the latest when that wait returns.
    for c in clients.values():
        assert c.wait_until(lambda c: _unhealthy_gpus(c, uuids) == {0, 1}, 7.0)
    t0 = time.monotonic()
    first = p.log().count("nvmlEventSetWait failed")
    time.sleep(2.0)  # observe the retry rate
    later = p.log().count("nvmlEventSetWait failed")
    assert later - first <= 3, f"{later - first} wait errors in {time.monotonic() - t0:.1f} s: a hot loop"


def test_uuid_lookup_error_on_an_event_marks_all_gpus_unhealthy(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus)
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running", 10)
    uuids = [d["uuid"] for d in two_gpus.config["devices"]]
    dev = two_gpus.config["devices"][0]
    dev["errors"] = {"nvmlDeviceGetUUID": NVML_ERROR_UNKNOWN}
    dev["xid_events"].append(79)
    two_gpus.write()
    for c in clients.values():
        assert c.wait_until(lambda c: _unhealthy_gpus(c, uuids) == {0, 1}, 2.0)
    assert "unidentifiable device" in p.log()


def test_recovery_window_heals_only_when_the_probe_succeeds(kubelet, two_gpus, plugin_factory):
    p = plugin_factory(two_gpus, device_config="nvidia:\n  healthRecoverySeconds: 1\n")
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running", 10)
    uuids = [d["uuid"] for d in two_gpus.config["devices"]]
    number = clients[NAMES[0]]
    # Probe fails (memory info errors): still unhealthy after several windows.
    dev = two_gpus.config["devices"][0]
    dev["errors"] = {"nvmlDeviceGetMemoryInfo": NVML_ERROR_UNKNOWN}
    dev["xid_events"].append(79)
    two_gpus.write()
    t0 = time.monotonic()
    assert number.wait_until(lambda c: _unhealthy_gpus(c, uuids) == {0}, 2.0)
    assert p.wait_for_log(f"GPU {uuids[0]} still failing its recovery probe", 3.0)
    assert _unhealthy_gpus(number, uuids) == {0}
    # The GPU answers again: healthy at the next expiry (>= 1 s after the event).
    dev["errors"] = {}
    two_gpus.write()
    assert number.wait_until(lambda c: _unhealthy_gpus(c, uuids) == set(), 3.0)
    assert time.monotonic() - t0 >= 1.0
    assert f"GPU {uuids[0]} recovered" in p.log()


def test_sighup_reloads_config_and_keeps_health(kubelet, two_gpus, plugin_factory, tmp_path):
    p = plugin_factory(two_gpus, device_config="nvidia:\n  gpuMemoryFactor: 1\n")
    clients = kubelet.wait_for_plugins(NAMES, timeout=30)
    assert p.wait_for_log("health checks running", 10)
    uuids = [d["uuid"] for d in two_gpus.config["devices"]]
    two_gpus.add_xid(0, 79)
    assert clients[NAMES[1]].wait_until(lambda c: _unhealthy_gpus(c, uuids) == {0}, 2.0)
    (tmp_path / "device-config.yaml").write_text("nvidia:\n  gpuMemoryFactor: 10\n  deviceSplitCount: 4\n")
    t0 = time.monotonic()
    p.proc.send_signal(signal.SIGHUP)
    # Same resources and sockets: the open streams carry the new lists; nothing re-registers, so
    # the kubelet never sees the resources disconnect.
    assert clients[NAMES[1]].wait_until(lambda c: len(c.devices) == 81920 // 10 + 24576 // 10, 5)
    assert clients[NAMES[0]].wait_until(lambda c: len(c.devices) == 8, 5)
    assert _unhealthy_gpus(clients[NAMES[0]], uuids) == {0}  # health survives the reload
    assert [r for r in kubelet.registrations if r.at >= t0] == []
    assert all(kubelet.plugin(n) is clients[n] and clients[n].stream_error is None for n in NAMES)
    # An invalid config on SIGHUP is logged and ignored; the plugin keeps serving.
    (tmp_path / "device-config.yaml").write_text("nvidia:\n  gpuMemoryFactor: -1\n")
    p.proc.send_signal(signal.SIGHUP)
    assert p.wait_for_log("reload failed, keeping the previous configuration", 5)
    assert p.proc.poll() is None and clients[NAMES[1]].stream_error is None
