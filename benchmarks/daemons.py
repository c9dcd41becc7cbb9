"""The real ``vgpu`` daemons as child processes, for the memory benchmarks.

Each is started as ``python -m vgpu <command>`` with its log in a file, measured from outside
with psutil (resident set size of the process and any children it forked) and stopped with
SIGTERM (SIGKILL after a grace period), also when the benchmark fails.
"""
from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence

import psutil

MB = 1_000_000  # the gates say MB: decimal megabytes (a stricter reading than MiB)


class Daemon:
    """``python -m vgpu <args>``; ``rss_mb()`` is its resident memory now."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str], log_path: pathlib.Path) -> None:
        self.args = [sys.executable, "-m", "vgpu", "--log-level", "INFO", *args]
        self.env = {**os.environ, **env}
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> Daemon:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first match of ``pattern`` in the log, once it appears (polled, with a deadline)."""
        rx = re.compile(pattern)
        return wait_for(lambda: rx.search(self.log()), timeout, f"/{pattern}/ in the log", self)

    def assert_running(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, \
            f"{self.args[3:]} exited with {self.proc.returncode if self.proc else None}:\n{self.log()[-4000:]}"

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

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None


def wait_for(predicate: Callable[[], object], timeout: float, what: str, daemon: Daemon | None = None) -> object:
    """Poll ``predicate`` until it returns something truthy (no fixed sleeps); fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if daemon is not None:
            daemon.assert_running()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                                 + (f"\n--- log ---\n{daemon.log()[-4000:]}" if daemon else ""))
        time.sleep(0.01)
