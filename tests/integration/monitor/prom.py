"""Finding (or installing) Debian's ``prometheus``/``promtool`` and running a throwaway Prometheus.

Testing conventions (docs/testing.md §2): these tests run whenever the programs are present; when they
are absent we try to install the Debian package (root + apt-get, as ``.ci/run`` does); only when
that is impossible do the tests skip, with the reason.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from vgpu.sim.processes import LoggedProcess, free_port

_install_error: str | None = None


def ensure_prometheus() -> tuple[str, str] | str:
    """(prometheus, promtool) paths, or the reason they cannot be had."""
    global _install_error
    found = shutil.which("prometheus"), shutil.which("promtool")
    if all(found):
        return found  # type: ignore[return-value]
    if _install_error is not None:
        return _install_error
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        _install_error = (
            "prometheus/promtool are not installed and cannot be installed here "
            "(needs root and apt-get: `apt-get install -y prometheus`)"
        )
        return _install_error
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"],
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"],
    ):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        found = shutil.which("prometheus"), shutil.which("promtool")
        if all(found):
            return found  # type: ignore[return-value]
        last = proc.stderr.strip()[-500:]
    _install_error = f"prometheus is not installed and `apt-get install prometheus` failed: {last}"
    return _install_error


class Prometheus(LoggedProcess):
    """A real Prometheus server with its own config and tmp storage, on a free 127.0.0.1 port."""

    def __init__(self, binary: str, workdir: pathlib.Path, targets: list[str], *, interval_s: int = 1):
        self.binary = binary
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "prometheus.yml"
        self.config.write_text(
            json.dumps(
                {  # JSON is YAML
                    "global": {
                        "scrape_interval": f"{interval_s}s",
                        "scrape_timeout": f"{interval_s}s",
                        "evaluation_interval": "15s",
                    },
                    "scrape_configs": [{"job_name": "vgpu-monitor", "static_configs": [{"targets": targets}]}],
                }
            )
        )
        super().__init__([binary], None, self.dir / "prometheus.log", name="prometheus")
        self.port = 0

    def start(self, timeout: float = 60.0) -> Prometheus:
        for _attempt in range(3):  # a port picked as free may be taken meanwhile
            self.port = free_port()
            self.args = [
                self.binary,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=info",
            ]
            super().start(append=True)
            assert self.proc is not None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                        if resp.status == 200:
                            return self
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(0.1)
            self.stop()
            if "address already in use" not in self.log():
                break
        raise AssertionError(f"prometheus did not become ready:\n{self.log()[-4000:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as resp:
            doc = json.loads(resp.read())
        assert doc.get("status") == "success", doc
        return doc["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        return self.api("query", query=promql)["result"]

    def stop(self, grace: float = 20.0) -> int | None:
        return super().stop(grace)
