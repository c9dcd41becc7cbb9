"""The real `vgpu monitor` process for integration tests and benchmarks.

``MonitorProcess`` starts ``python -m vgpu monitor`` on ``127.0.0.1:0`` with the fake NVML's
environment and a kubeconfig for the simulated API server, reads the bound port from its log,
and is always stopped with SIGTERM (then SIGKILL) by whoever started it.
"""
from __future__ import annotations

import pathlib
import re
import sys
import time
import urllib.error
import urllib.request

from tests.support.processes import LoggedProcess, subprocess_env, wait_until

_SERVING = re.compile(r"serving metrics on http://([0-9.]+):(\d+)/metrics")


class MonitorProcess(LoggedProcess):
    def __init__(self, workdir: pathlib.Path, hook: pathlib.Path, kubeconfig: pathlib.Path | None, *,
                 nvml_env: dict[str, str] | None = None, node_name: str = "node-1", extra_args: list[str] | None = None,
                 log_level: str = "INFO"):
        args = [sys.executable, "-m", "vgpu", "--log-level", log_level, "monitor", "--node-name", node_name,
                "--hook-path", str(hook), "--listen", "127.0.0.1:0"]
        if kubeconfig is not None:
            args += ["--kubeconfig", str(kubeconfig)]
        args += extra_args or []
        env = subprocess_env(nvml_env or {})
        for key in ("NODE_NAME", "HOOK_PATH", "VGPU_LISTEN", "KUBECONFIG"):
            env.pop(key, None)
        if not nvml_env:
            env["VGPU_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1"
        super().__init__(args, env, workdir / f"monitor-{time.monotonic_ns()}.log", name="vgpu monitor")
        self.port = 0

    def start(self, timeout: float = 30.0) -> MonitorProcess:
        """Start it and wait (failing at once if it exits) for the log line naming its bound port."""
        super().start()
        m = wait_until(lambda: _SERVING.search(self.log()), timeout, "vgpu monitor to serve metrics", process=self)
        self.port = int(m.group(2))
        return self

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

    def terminate(self) -> int | None:
        """SIGTERM (SIGKILL after 15 s): the exit status, or None when it had to be killed."""
        return self.stop(15)
