"""Child processes for the integration tests and the benchmarks, started and stopped one way.

A :class:`LoggedProcess` runs a command with stdin closed and stdout+stderr in a log file (read
at any time with ``log()``, printed by the fixtures at teardown so pytest shows it on failure).
``stop()`` sends SIGTERM and waits a grace period, then SIGKILLs, so whoever started a process
tears it down also when a test fails.  ``wait_until`` polls with a deadline: tests never sleep
to synchronise.

:class:`MonitorProcess` is the real ``vgpu monitor``: started as ``python -m vgpu monitor`` on
``127.0.0.1:0`` with the fake NVML's environment and a kubeconfig for the simulated API server,
it reads the bound port from its log and is always stopped with SIGTERM (then SIGKILL) by
whoever started it.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

T = TypeVar("T")
_P = TypeVar("_P", bound="LoggedProcess")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (another process may take it meanwhile)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def subprocess_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The current environment plus ``extra`` (for starting real daemons in tests)."""
    env = dict(os.environ)
    env.update(extra)
    return env


def python_child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """``subprocess_env(extra)`` with the repository root first on PYTHONPATH, for ``python -c`` children."""
    env = subprocess_env(extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


class LoggedProcess:
    """``args`` run with ``env`` (None: inherit) and all output in ``log_path``.

    ``name`` is what failure messages call it (default: the program's file name).
    """

    def __init__(
        self, args: Sequence[str], env: Mapping[str, str] | None, log_path: pathlib.Path, *, name: str | None = None
    ) -> None:
        self.args = list(args)
        self.name = name or pathlib.Path(self.args[0]).name
        self.env = dict(env) if env is not None else None
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self._log: Any = None

    def start(self: _P, *, append: bool = False) -> _P:
        """Start the process; ``append`` keeps what an earlier run wrote to the log."""
        self._close_log()
        self._log = open(self.log_path, "ab" if append else "wb")
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the process was never started"
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def assert_running(self) -> None:
        """Fail at once, with the log's tail, when the process has exited."""
        assert self.proc is not None, f"{self.name} was never started"
        assert self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode}:\n{self.log()[-4000:]}"

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.wait(timeout)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; idempotent.

        Returns the exit status (also of a process that had already exited), or None when it had
        to be killed or was never started.
        """
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    rc = self.proc.wait(grace)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
            else:
                rc = self.proc.returncode
        self._close_log()
        return rc

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def wait_until(
    predicate: Callable[[], T], timeout: float, what: str, *, step: float = 0.05, process: LoggedProcess | None = None
) -> T:
    """Poll ``predicate`` until it returns something truthy and return that (never a fixed sleep).

    Fails naming ``what`` after ``timeout`` seconds; with ``process``, fails at once when it exits
    and adds its log's tail to the message.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if process is not None:
            process.assert_running()
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what}"
                + (f"\n--- log ---\n{process.log()[-4000:]}" if process else "")
            )
        time.sleep(step)


_SERVING = re.compile(r"serving metrics on http://([0-9.]+):(\d+)/metrics")


class MonitorProcess(LoggedProcess):
    def __init__(
        self,
        workdir: pathlib.Path,
        hook: pathlib.Path,
        kubeconfig: pathlib.Path | None,
        *,
        nvml_env: dict[str, str] | None = None,
        node_name: str = "node-1",
        extra_args: list[str] | None = None,
        log_level: str = "INFO",
    ):
        args = [
            sys.executable,
            "-m",
            "vgpu",
            "--log-level",
            log_level,
            "monitor",
            "--node-name",
            node_name,
            "--hook-path",
            str(hook),
            "--listen",
            "127.0.0.1:0",
        ]
        if kubeconfig is not None:
            args += ["--kubeconfig", str(kubeconfig)]
        args += extra_args or []
        env = subprocess_env(nvml_env or {})
        for key in ("NODE_NAME", "HOOK_PATH", "VGPU_LISTEN", "KUBECONFIG"):
            env.pop(key, None)
        if not nvml_env:  # a monitor without NVML: container metrics only (it retries NVML)
            env["VGPU_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1"
            env.setdefault("FAIL_ON_INIT_ERROR", "false")
        super().__init__(args, env, workdir / f"monitor-{time.monotonic_ns()}.log", name="vgpu monitor")
        self.port = 0

    def start(self, timeout: float = 30.0, *, append: bool = False) -> MonitorProcess:
        """Start it and wait (failing at once if it exits) for the log line naming its bound port."""
        super().start(append=append)
        m = wait_until(lambda: _SERVING.search(self.log()), timeout, "vgpu monitor to serve metrics", process=self)
        assert m is not None  # wait_until returns a truthy value
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
