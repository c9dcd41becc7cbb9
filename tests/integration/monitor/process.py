"""The real `vgpu monitor` process for integration tests and benchmarks.

``MonitorProcess`` starts ``python -m vgpu monitor`` on ``127.0.0.1:0`` with the fake NVML's
environment and a kubeconfig for the simulated API server, reads the bound port from its log,
and is always stopped with SIGTERM (then SIGKILL) by whoever started it.
"""
from __future__ import annotations

import pathlib
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.conftest import subprocess_env

_SERVING = re.compile(r"serving metrics on http://([0-9.]+):(\d+)/metrics")


class MonitorProcess:
    def __init__(self, workdir: pathlib.Path, hook: pathlib.Path, kubeconfig: pathlib.Path | None, *,
                 nvml_env: dict[str, str] | None = None, node_name: str = "node-1", extra_args: list[str] | None = None,
                 log_level: str = "INFO"):
        self.log_path = workdir / f"monitor-{time.monotonic_ns()}.log"
        self.args = [sys.executable, "-m", "vgpu", "--log-level", log_level, "monitor", "--node-name", node_name,
                     "--hook-path", str(hook), "--listen", "127.0.0.1:0"]
        if kubeconfig is not None:
            self.args += ["--kubeconfig", str(kubeconfig)]
        self.args += extra_args or []
        self.env = subprocess_env(nvml_env or {})
        for key in ("NODE_NAME", "HOOK_PATH", "VGPU_LISTEN", "KUBECONFIG"):
            self.env.pop(key, None)
        if not nvml_env:
            self.env["VGPU_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self, timeout: float = 30.0) -> MonitorProcess:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            m = _SERVING.search(self.log())
            if m:
                self.port = int(m.group(2))
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"vgpu monitor exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"vgpu monitor did not start within {timeout} s:\n{self.log()[-4000:]}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[int, bytes, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as resp:
                return resp.status, resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("Content-Type", "")

    def scrape(self) -> bytes:
        status, body, _ = self.get("/metrics")
        assert status == 200, body
        return body

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def terminate(self) -> int | None:
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    rc = self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
            else:
                rc = self.proc.returncode
        if getattr(self, "_log", None):
            self._log.close()
        return rc

