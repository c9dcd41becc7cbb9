"""The real `vgpu plugin` process against the fake NVML and the fake kubelet.

``PluginProcess`` starts ``python -m vgpu plugin`` with the fake NVML's environment, a
short socket directory (unix socket paths are limited to 107 bytes) and its log in a
file; every fixture tears down what it started, also when the test fails.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import LoggedProcess, subprocess_env, wait_until

NAMES = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
SOCKETS = ("nvidia-vgpu-number.sock", "nvidia-vgpu-memory.sock", "nvidia-vgpu-cores.sock")
_SERVING = re.compile(r"serving /healthz, /livez and /metrics on http://([0-9.]+):(\d+)")


class PluginProcess(LoggedProcess):
    def __init__(
        self,
        workdir: pathlib.Path,
        socket_dir: str,
        nvml: fakenvml.FakeNvml,
        *,
        device_config: str | None = None,
        node_config: str | None = None,
        env: dict[str, str] | None = None,
        node_name: str = "node-1",
    ) -> None:
        self.socket_dir = socket_dir
        dc, nc = workdir / "device-config.yaml", workdir / "config.json"
        if device_config is not None:
            dc.write_text(device_config)
        if node_config is not None:
            nc.write_text(node_config)
        args = [
            sys.executable,
            "-m",
            "vgpu",
            "--log-level",
            "INFO",
            "plugin",
            "--kubelet-socket",
            os.path.join(socket_dir, "kubelet.sock"),
            "--device-config",
            str(dc),
            "--node-config",
            str(nc),
            "--metrics-listen",
            "127.0.0.1:0",  # tests run plugins side by side: never the fixed default port
        ]
        if node_name:
            args += ["--node-name", node_name]
        proc_env = subprocess_env({**nvml.env, **(env or {})})
        proc_env.pop("NODE_NAME", None)
        super().__init__(args, proc_env, workdir / "plugin.log", name="vgpu plugin")
        self._url: str | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the plugin's endpoint, from its log (waits for the line)."""
        if self._url is None:
            m = wait_until(lambda: _SERVING.search(self.log()), 30, "the plugin's metrics endpoint", process=self)
            self._url = f"http://{m.group(1)}:{m.group(2)}"
        return self._url

    def get(self, path: str) -> tuple[int, str]:
        """(status, body) of ``GET path`` on the plugin's endpoint."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_for_log(self, text: str, timeout: float) -> bool:
        """Whether ``text`` appears in the log within ``timeout`` seconds (polled, with a deadline)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return True
            time.sleep(0.02)
        return text in self.log()

    def terminate(self) -> None:
        self.stop(10)


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
    return fakenvml.FakeNvml.create(
        tmp_path / "nvml",
        [
            fakenvml.device(0),
            fakenvml.device(1, name="NVIDIA A10", memory_total_mib=24576, mig_capable=False, compute_capability=[8, 6]),
        ],
    )


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
