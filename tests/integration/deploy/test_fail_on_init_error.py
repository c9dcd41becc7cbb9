"""--fail-on-init-error / FAIL_ON_INIT_ERROR, through the real processes and the fake NVML.

The chart sets it to false (deploy/helm/volcano-vgpu/values.yaml, failOnInitError): a node whose
NVML cannot start yet (driver still loading) or that has no GPU must not crash-loop.  Then

- the plugin stays up, registers nothing with the kubelet, says why once, retries with backoff
  and registers its three resources as soon as NVML answers;
- the monitor serves container metrics without the host families and adds them once NVML starts.

With the daemons' default (true) both exit 1 naming the NVML error.
"""

from __future__ import annotations

import pathlib
import shutil
import tempfile
import time
from collections.abc import Iterator

import pytest

from tests.integration.monitor.conftest import create_pod
from tests.integration.plugin.conftest import PluginProcess
from tests.unit.deploy import manifests as m
from tests.unit.monitor.helpers import MIB, UUIDS, add_container, one, parse
from vgpu.nvml.backoff import FIRST_S as NVML_RETRY_FIRST_S
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import LoggedProcess, MonitorProcess, wait_until

NVML_ERROR_DRIVER_NOT_LOADED = 9
NAMES = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
WAITING = "not advertising any resource (fail-on-init-error is false)"
# How long the tests hold NVML down: several retries of the backoff (1 s, 2 s, ...).
HOLD_S = 3.5 * NVML_RETRY_FIRST_S


def _chart_setting(container: str) -> str:
    """FAIL_ON_INIT_ERROR as the chart's default render sets it for ``container``."""
    return m.plain_env(m.container(m.daemonset(m.single_file_docs()), container))["FAIL_ON_INIT_ERROR"]


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    sock = tempfile.mkdtemp(prefix="vgpu-foie-", dir="/tmp")  # short: unix socket paths
    k = FakeKubelet(sock).start()
    try:
        yield k
    finally:
        k.stop()
        shutil.rmtree(sock, ignore_errors=True)


@pytest.fixture
def plugins() -> Iterator[list[PluginProcess]]:
    started: list[PluginProcess] = []
    yield started
    for p in started:
        p.terminate()
        print(f"--- plugin log ---\n{p.log()[-4000:]}")


def _plugin(tmp_path, kubelet, nvml, apiserver, plugins, **env: str) -> PluginProcess:
    work = tmp_path / f"plugin{len(plugins)}"
    work.mkdir()
    base = {"KUBECONFIG": str(apiserver.kubeconfig(work / "kubeconfig")), "HOOK_PATH": str(tmp_path)}
    p = PluginProcess(work, kubelet.socket_dir, nvml, env={**base, **env})
    plugins.append(p)
    return p.start()


def _stays(predicate, seconds: float, what: str) -> None:
    """``predicate`` holds throughout an observation window of ``seconds`` (checked continuously)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert predicate(), what
        time.sleep(0.05)


def _up_after(log: str) -> float:
    line = next(x for x in log.splitlines() if "NVML is up after" in x)
    return float(line.split("NVML is up after", 1)[1].split()[0])


def test_plugin_waits_for_nvml_then_registers(tmp_path: pathlib.Path, kubelet, apiserver, plugins):
    nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0), fakenvml.device(1)])
    nvml.inject_error("nvmlInit", NVML_ERROR_DRIVER_NOT_LOADED)
    assert _chart_setting("plugin") == "false"
    p = _plugin(tmp_path, kubelet, nvml, apiserver, plugins, FAIL_ON_INIT_ERROR=_chart_setting("plugin"))
    assert p.wait_for_log(WAITING, 30), p.log()[-2000:]
    _stays(lambda: p.proc.poll() is None and kubelet.registrations == [], HOLD_S, "waits, advertising nothing")
    nvml.clear_error("nvmlInit")  # the driver has loaded
    kubelet.wait_for_plugins(NAMES, timeout=30)
    log = p.log()
    assert log.count("NVML cannot start") == 1, "says why once, however often it retries"
    assert "Driver Not Loaded" in log or "DRIVER_NOT_LOADED" in log or "driver" in log.lower()
    assert _up_after(log) >= HOLD_S, "it registered only after NVML came up"
    assert len(kubelet.plugin(NAMES[0]).healthy_ids()) == 20  # 2 GPUs x deviceSplitCount 10


def test_plugin_on_a_node_without_gpus_waits_until_one_appears(tmp_path: pathlib.Path, kubelet, apiserver, plugins):
    nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [])
    p = _plugin(tmp_path, kubelet, nvml, apiserver, plugins, FAIL_ON_INIT_ERROR="false")
    assert p.wait_for_log("NVML finds no GPU on this node", 30), p.log()[-2000:]
    _stays(lambda: p.proc.poll() is None and kubelet.registrations == [], HOLD_S, "waits, advertising nothing")
    nvml.config["devices"].append(fakenvml.device(0))
    nvml.write()
    kubelet.wait_for_plugins(NAMES, timeout=30)
    assert len(kubelet.plugin(NAMES[0]).healthy_ids()) == 10
    assert p.log().count("NVML cannot start") == 1


def test_plugin_stops_cleanly_while_waiting(tmp_path: pathlib.Path, kubelet, apiserver, plugins):
    nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0)])
    nvml.inject_error("nvmlInit", NVML_ERROR_DRIVER_NOT_LOADED)
    p = _plugin(tmp_path, kubelet, nvml, apiserver, plugins, FAIL_ON_INIT_ERROR="false")
    assert p.wait_for_log(WAITING, 30)
    p.proc.terminate()
    assert p.wait_exit(15) == 0
    assert "vgpu plugin stopped" in p.log()


def test_plugin_default_exits_1_and_a_bad_value_exits_2(tmp_path: pathlib.Path, kubelet, apiserver, plugins):
    nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0)])
    nvml.inject_error("nvmlInit", NVML_ERROR_DRIVER_NOT_LOADED)
    p = _plugin(tmp_path, kubelet, nvml, apiserver, plugins)
    assert p.wait_exit(30) == 1
    assert "NVML cannot start" in p.log() and WAITING not in p.log()
    q = _plugin(tmp_path, kubelet, nvml, apiserver, plugins, FAIL_ON_INIT_ERROR="sometimes")
    assert q.wait_exit(30) == 2
    assert "--fail-on-init-error / FAIL_ON_INIT_ERROR: 'sometimes' is not a boolean" in q.log()
    assert kubelet.registrations == []


def _monitor(tmp_path, apiserver, nvml, **env: str) -> MonitorProcess:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    work = tmp_path / f"monitor-{len(list(tmp_path.glob('monitor-*')))}"
    work.mkdir()
    return MonitorProcess(work, hook, apiserver.kubeconfig(work / "kubeconfig"), nvml_env={**nvml.env, **env})


def test_monitor_serves_containers_without_nvml_then_adds_the_host_families(tmp_path: pathlib.Path, apiserver):
    nvml = fakenvml.FakeNvml.create(
        tmp_path / "nvml", [fakenvml.device(0, uuid=UUIDS[0], memory_used_mib=1000, utilization_gpu=40)]
    )
    nvml.inject_error("nvmlInit", NVML_ERROR_DRIVER_NOT_LOADED)
    assert _chart_setting("monitor") == "false"
    mon = _monitor(tmp_path, apiserver, nvml, FAIL_ON_INIT_ERROR=_chart_setting("monitor"))
    pod = create_pod(apiserver, "p", gpus={"main": UUIDS[:1]})
    add_container(
        tmp_path / "hook", pod["metadata"]["uid"], "main", uuids=UUIDS[:1], limits_mib=(3000,), procs=[(1, [5])]
    )
    mon.start()
    try:
        s = parse(mon.scrape())
        assert s["vgpu_monitor_nvml_up"] == [({}, 0.0)]
        assert "hami_host_gpu_memory_used_bytes" not in s and "HostGPUMemoryUsage" not in s
        assert one(s, "hami_vgpu_memory_used_bytes", pod="p", vdevice_index="0") == 5 * MIB
        nvml.clear_error("nvmlInit")
        wait_until(
            lambda: parse(mon.scrape())["vgpu_monitor_nvml_up"] == [({}, 1.0)],
            60,
            "the monitor to pick NVML up",
            process=mon,
        )
        s = parse(mon.scrape())
        assert one(s, "hami_host_gpu_memory_used_bytes", device_uuid=UUIDS[0]) == 1000 * MIB
        assert one(s, "hami_vgpu_memory_used_bytes", pod="p", vdevice_index="0") == 5 * MIB
        assert "vgpu_monitor_nvml_sample_age_seconds" in s
        assert mon.log().count("NVML is not available") == 1
    finally:
        mon.terminate()
        print(f"--- monitor log ---\n{mon.log()[-4000:]}")


def test_monitor_default_exits_1_when_nvml_cannot_start(tmp_path: pathlib.Path, apiserver):
    nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0)])
    nvml.inject_error("nvmlInit", NVML_ERROR_DRIVER_NOT_LOADED)
    mon = _monitor(tmp_path, apiserver, nvml)
    LoggedProcess.start(mon)  # not MonitorProcess.start, which waits for it to serve
    try:
        assert mon.wait_exit(30) == 1
        assert "NVML cannot start (fail-on-init-error is true)" in mon.log()
    finally:
        mon.terminate()
