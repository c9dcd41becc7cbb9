"""The real `vgpu plugin` process against the fake NVML and the fake kubelet.

``PluginProcess`` starts ``python -m vgpu plugin`` with the fake NVML's environment, a
short socket directory (unix socket paths are limited to 107 bytes) and its log in a
file; every fixture tears down what it started, also when the test fails.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest

from tests.conftest import subprocess_env
from vgpu.sim import fakenvml
from vgpu.sim.kubelet import FakeKubelet

NAMES = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
SOCKETS = ("nvidia-vgpu-number.sock", "nvidia-vgpu-memory.sock", "nvidia-vgpu-cores.sock")


class PluginProcess:
    def __init__(self, workdir: pathlib.Path, socket_dir: str, nvml: fakenvml.FakeNvml, *,
                 device_config: str | None = None, node_config: str | None = None,
                 env: dict[str, str] | None = None, node_name: str = "node-1") -> None:
        self.socket_dir = socket_dir
        self.log_path = workdir / "plugin.log"
        dc, nc = workdir / "device-config.yaml", workdir / "config.json"
        if device_config is not None:
            dc.write_text(device_config)
        if node_config is not None:
            nc.write_text(node_config)
        self.args = [sys.executable, "-m", "vgpu", "--log-level", "INFO", "plugin",
                     "--kubelet-socket", os.path.join(socket_dir, "kubelet.sock"),
                     "--device-config", str(dc), "--node-config", str(nc)]
        if node_name:
            self.args += ["--node-name", node_name]
        self.env = subprocess_env({**nvml.env, **(env or {})})
        self.env.pop("NODE_NAME", None)
        self.proc: subprocess.Popen | None = None

    def start(self) -> "PluginProcess":
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return True
            time.sleep(0.02)
        return text in self.log()

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def terminate(self) -> None:
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
def socket_dir() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="vgpu-it-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(socket_dir: str) -> Iterator[FakeKubelet]:
    k = FakeKubelet(socket_dir).start()
    yield k
    k.stop()


@pytest.fixture
def two_gpus(tmp_path: pathlib.Path) -> fakenvml.FakeNvml:
    """One A100-SXM4-80GB and one 24 GiB GPU (an A10)."""
    return fakenvml.FakeNvml.create(tmp_path / "nvml", [
        fakenvml.device(0),
        fakenvml.device(1, name="NVIDIA A10", memory_total_mib=24576, mig_capable=False,
                        compute_capability=[8, 6]),
    ])


@pytest.fixture
def plugin_factory(tmp_path: pathlib.Path, socket_dir: str):
    started: list[PluginProcess] = []

    def make(nvml: fakenvml.FakeNvml, **kw) -> PluginProcess:
        p = PluginProcess(tmp_path, socket_dir, nvml, **kw).start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.terminate()
        print(f"--- plugin log ({p.log_path}), shown by pytest on failure ---\n{p.log()[-6000:]}")
