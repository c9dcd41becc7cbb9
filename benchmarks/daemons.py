"""The real ``vgpu`` daemons as child processes, for the memory benchmarks.

Each is started as ``python -m vgpu <command>`` with its log in a file, measured from outside
with psutil (resident set size of the process and any children it forked) and stopped with
SIGTERM (SIGKILL after a grace period), also when the benchmark fails.
"""

from __future__ import annotations

import pathlib
import re
import sys
from collections.abc import Callable, Mapping, Sequence

import psutil

from vgpu.sim.processes import LoggedProcess, subprocess_env
from vgpu.sim.processes import wait_until as _wait_until

MB = 1_000_000  # the gates say MB: decimal megabytes (a stricter reading than MiB)


class Daemon(LoggedProcess):
    """``python -m vgpu <args>``; ``rss_mb()`` is its resident memory now."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str], log_path: pathlib.Path) -> None:
        super().__init__(
            [sys.executable, "-m", "vgpu", "--log-level", "INFO", *args],
            subprocess_env(env),
            log_path,
            name=f"vgpu {' '.join(args[:1])}",
        )

    def wait_for_log(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of ``pattern`` in the log, once it appears (polled, with a deadline)."""
        rx = re.compile(pattern)
        return wait_for(lambda: rx.search(self.log()), timeout, f"/{pattern}/ in the log", self)

    def rss_mb(self) -> float:
        """Resident memory of the daemon (and of any child it started), in MB."""
        self.assert_running()
        proc = psutil.Process(self.pid)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total / MB


def wait_for(predicate: Callable[[], object], timeout: float, what: str, daemon: Daemon | None = None) -> object:
    """Poll ``predicate`` until it returns something truthy (no fixed sleeps); fail naming ``what``."""
    return _wait_until(predicate, timeout, what, step=0.01, process=daemon)
