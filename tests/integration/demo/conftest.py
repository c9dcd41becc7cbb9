"""`vgpu demo` as a real subprocess, watched from outside with psutil.

``DemoRun`` starts ``python -m vgpu demo …``, reads its stdout and stderr on threads (so a test
can wait for a line with a deadline), and records every descendant process it ever sees, so
the test can check that none is left once the demo has exited.  The fixture kills whatever is
still alive at the end (demo and descendants), also when the test failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from vgpu.sim.nvml import fakenvml


class DemoRun:
    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vgpu", "demo", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=full_env,
            text=True,
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.seen: dict[int, psutil.Process] = {}
        self.cmdlines: dict[int, list[str]] = {}  # recorded while the process was alive
        self._cond = threading.Condition()
        self._done = threading.Event()
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True),
            threading.Thread(target=self._watch, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, stream: Any, sink: list[str]) -> None:
        for line in stream:
            with self._cond:
                sink.append(line)
                self._cond.notify_all()

    def _watch(self) -> None:
        """Record descendants as they appear (the demo's children live in their own sessions)."""
        try:
            me = psutil.Process(self.proc.pid)
        except psutil.NoSuchProcess:
            return
        while not self._done.is_set() and self.proc.poll() is None:
            try:
                for child in me.children(recursive=True):
                    if child.pid not in self.seen:
                        try:
                            self.cmdlines[child.pid] = child.cmdline()
                        except psutil.Error:
                            self.cmdlines[child.pid] = []
                        self.seen[child.pid] = child
            except psutil.NoSuchProcess:
                return
            self._done.wait(0.1)

    def wait_line(self, text: str, timeout: float, stream: str = "stdout") -> str:
        """The first line containing ``text``; fails after ``timeout`` or soon after the demo exited."""
        sink = self.stdout if stream == "stdout" else self.stderr
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        with self._cond:
            while True:
                found = next((line for line in sink if text in line), None)
                if found is not None:
                    return found
                now = time.monotonic()
                if self.proc.poll() is not None:
                    exited_at = exited_at or now
                if now >= deadline or (exited_at is not None and now - exited_at > 2.0):
                    raise AssertionError(
                        f"no line with {text!r} within {timeout} s; rc={self.proc.poll()}\n"
                        f"--- stdout ---\n{''.join(self.stdout)[-6000:]}\n"
                        f"--- stderr ---\n{''.join(self.stderr)[-6000:]}"
                    )
                self._cond.wait(min(deadline - now, 0.25))

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._done.set()
        for t in self._threads:
            t.join(10)
        return code

    def descendants_alive(self) -> list[str]:
        alive = []
        for pid, p in self.seen.items():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {' '.join(p.cmdline())[:200]}")
            except psutil.NoSuchProcess:
                pass
        return alive

    def report(self) -> dict[str, Any]:
        return json.loads("".join(self.stdout))

    def output(self) -> str:
        return "".join(self.stdout) + "\n--- stderr ---\n" + "".join(self.stderr)

    def kill_all(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for p in self.seen.values():
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self._done.set()


@pytest.fixture
def demo() -> Iterator[Any]:
    """``demo(args, env=None) -> DemoRun``; everything is killed at the end, also on failure."""
    fakenvml.library_path()  # build the fake NVML once here, not inside the timed run
    runs: list[DemoRun] = []

    def start(args: list[str], env: dict[str, str] | None = None) -> DemoRun:
        run = DemoRun(args, env)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.kill_all()
        if run.proc.returncode not in (0, None):
            print(f"--- demo output (rc={run.proc.returncode}) ---\n{run.output()[-12000:]}")


def child_names(run: DemoRun) -> set[str]:
    """Which daemons the demo started (from the command lines seen while they ran)."""
    names = set()
    for cmd in run.cmdlines.values():
        if "plugin" in cmd:
            names.add("plugin")
        if "monitor" in cmd:
            names.add("monitor")
    return names


def find_child(run: DemoRun, *words: str) -> psutil.Process:
    return next(run.seen[pid] for pid, cmd in run.cmdlines.items() if all(w in cmd for w in words))
