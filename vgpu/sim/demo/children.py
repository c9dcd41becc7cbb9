"""The demo's real child processes (`vgpu plugin`, `vgpu monitor`): start, watch, stop.

Each child runs ``python -m vgpu …`` in its OWN session, so a Ctrl-C in the terminal reaches
only the demo, which then stops the children in order (SIGTERM, then SIGKILL after a grace
period) instead of racing them.  Their output goes to a log file in the demo's temp dir; the
demo shows the tail when one of them fails.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import vgpu

STOP_GRACE_S = 10.0
_PACKAGE_PARENT = str(pathlib.Path(vgpu.__file__).resolve().parents[1])


class ComponentFailed(RuntimeError):
    """A child process ended or misbehaved; the message names it and quotes its log."""


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """Our environment plus ``extra``; the ``vgpu`` package we run from is importable in the child."""
    env = dict(os.environ)
    env.update(extra)
    path = env.get("PYTHONPATH", "")
    if _PACKAGE_PARENT not in path.split(os.pathsep):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, path) if p)
    env.pop("NODE_NAME", None)  # every child gets --node-name explicitly
    return env


@dataclass
class ChildProcess:
    """One ``python -m vgpu <args>`` child with its log file."""

    name: str
    args: Sequence[str]
    env: Mapping[str, str]
    log_path: pathlib.Path
    proc: subprocess.Popen | None = None
    stop_requested: bool = False
    exit_code: int | None = None
    _log: object = field(default=None, repr=False)

    def start(self) -> ChildProcess:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vgpu", *self.args],
            env=dict(self.env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def poll(self) -> int | None:
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is not None and self.exit_code is None:
            self.exit_code = code
        return code

    @property
    def failed(self) -> bool:
        """Exited on its own (not asked to), or asked and exited non-zero."""
        code = self.poll()
        if code is None:
            return False
        return not self.stop_requested or code != 0

    def log(self, limit: int = 1 << 20) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - limit))
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log(64 * 1024).splitlines()[-lines:])

    def wait_for_log(self, pattern: str, timeout: float) -> re.Match[str]:
        """Poll the log for ``pattern`` (a regex) until ``timeout``; a child that exits first fails."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.log())
            if m:
                return m
            if self.poll() is not None:
                raise ComponentFailed(
                    f"{self.name} exited with status {self.exit_code} during startup:\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise ComponentFailed(f"{self.name} did not log {pattern!r} within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def signal_stop(self) -> None:
        """SIGTERM (both daemons stop cleanly on it); no wait."""
        if self.proc is None:
            return
        self.stop_requested = True
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait_stopped(self, timeout: float = STOP_GRACE_S) -> int | None:
        """Wait for the exit; SIGKILL the whole session after ``timeout``.  Returns the exit status."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(5)
        self.poll()
        if self._log is not None:
            self._log.close()  # type: ignore[attr-defined]
            self._log = None
        return self.exit_code

    def kill_now(self) -> None:
        """Second Ctrl-C: no grace."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop_requested = True
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
