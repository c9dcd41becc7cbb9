"""Fixtures for the deployment end-to-end tests: the Volcano e2e cluster (simulated API server,
real `vgpu plugin`, fake kubelet, scheduler emulator) plus a real `vgpu monitor` process."""
from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.integration.volcano.conftest import apiserver, cluster, cluster_factory, hook_path  # noqa: F401
from tests.integration.volcano.conftest import NODE
from tests.support.processes import free_port, subprocess_env, wait_until


class MonitorProcess:
    """`python -m vgpu monitor` against the simulated API server and the fake NVML."""

    def __init__(self, workdir: pathlib.Path, env: dict[str, str], hook_path: pathlib.Path, kubeconfig: str):
        self.port = free_port()
        self.log_path = workdir / "monitor.log"
        self.args = [sys.executable, "-m", "vgpu", "--log-level", "INFO", "monitor",
                     "--listen", f"127.0.0.1:{self.port}", "--node-name", NODE, "--hook-path", str(hook_path),
                     "--kubeconfig", kubeconfig, "--device-config", str(workdir / "absent-device-config.yaml")]
        self.env = subprocess_env(env)
        self.env.pop("NODE_NAME", None)
        self.proc: subprocess.Popen | None = None

    def start(self) -> "MonitorProcess":
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        return self

    def get(self, path: str) -> tuple[int, str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, f"monitor exited:\n{self.log()}"
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"monitor not healthy within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "_log", None):
            self._log.close()


@pytest.fixture
def monitor_factory(tmp_path: pathlib.Path):
    started: list[MonitorProcess] = []

    def make(cluster) -> MonitorProcess:
        work = tmp_path / f"monitor{len(started)}"
        work.mkdir()
        kubeconfig = cluster.api.kubeconfig(work / "kubeconfig")
        mon = MonitorProcess(work, dict(cluster.nvml.env), cluster.hook_path, str(kubeconfig)).start()
        started.append(mon)
        return mon

    yield make
    for mon in started:
        mon.stop()
        print(f"--- monitor log ({mon.log_path}) ---\n{mon.log()[-6000:]}")


DRIVER_UA = "vgpu-tests/deploy-driver"
"""User-Agent of the test's own API requests (scheduler emulator), told apart from the daemons'."""


def run_allocation_flow(cluster):
    """Drive the plugin through its API-touching paths; returns the admitted container's result.

    Registration has happened (the fixture waited for it).  Then: a pod scheduled by the
    Volcano emulator with the node lock and admitted (Allocate success, annotation patches,
    lock release), and a pod nobody scheduled (Allocate fails, the plugin posts an Event).
    """
    from vgpu.protocol import keys
    from vgpu.sim.admission import pod_manifest

    from tests.integration.volcano.conftest import MEMORY, NUMBER

    cluster.core.api_client.user_agent = DRIVER_UA
    cluster.create_pod(pod_manifest("ok", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 1000}}]))
    out = cluster.scheduler("master", node_lock_enable=True).schedule_once()
    assert [o.node for o in out] == [NODE], out
    res = cluster.admit("ok")
    assert res.admitted, res.error
    wait_until(lambda: cluster.annotations("ok").get(keys.BIND_PHASE) == "success", 10, "bind-phase success")
    wait_until(lambda: keys.NODE_LOCK not in (cluster.node()["metadata"].get("annotations") or {}), 10,
               "node lock release")
    cluster.create_pod(pod_manifest("stray", [{"name": "c", "limits": {NUMBER: 1}}]))
    assert not cluster.admit("stray").admitted
    wait_until(lambda: cluster.events(), 10, "an Event from the plugin")
    return res.container("c")
