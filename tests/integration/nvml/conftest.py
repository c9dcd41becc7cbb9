"""Run vgpu.nvml against the fake NVML in child processes.

nvidia-ml-py and dlopen keep one NVML library (and the fake its configuration) per
process, so every test drives its own Python child started with the fake's env.  The
child evaluates one Python expression per request line and answers one JSON line, so a
test can act on the fake's files between two calls of a *running* process.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import REPO_ROOT, python_child_env

# The child: one JSON request per line ({"exec": src} or {"eval": expr}), one JSON answer.
CHILD_LOOP = r"""
import dataclasses, json, sys, traceback
ns = {}
def plain(v):
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)
for line in sys.stdin:
    req = json.loads(line)
    try:
        if "exec" in req:
            exec(req["exec"], ns)
            out = {"value": None}
        else:
            out = {"value": plain(eval(req["eval"], ns))}
    except Exception as exc:
        out = {"error": type(exc).__name__, "message": str(exc), "code": getattr(exc, "code", None),
               "trace": traceback.format_exc()}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


class ChildError(Exception):
    """An exception raised inside the child; ``code`` is the NVML code when it was an NvmlError."""

    def __init__(self, kind: str, message: str, code: int | None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.code = code


class NvmlChild:
    """A Python process with the fake NVML env that evaluates expressions on request."""

    def __init__(self, env: dict[str, str], setup: str = "", timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._stderr: str | None = None
        full_env = python_child_env(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", CHILD_LOOP],
            env=full_env,
            cwd=str(REPO_ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        if setup:
            self.run(setup)

    def _request(self, kind: str, code: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({kind: code}) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"child did not answer {code!r} within {self.timeout}s")
            if self._sel.select(left):
                break
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=5)
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"child exited ({self.proc.returncode}) on {code!r}: {err}")
        answer = json.loads(line)
        if "error" in answer:
            raise ChildError(answer["error"], answer["message"], answer.get("code"))
        return answer["value"]

    def run(self, statements: str) -> None:
        """Execute statements in the child's namespace."""
        self._request("exec", statements)

    def eval(self, expression: str) -> Any:
        """Evaluate an expression in the child; dataclasses come back as dicts."""
        return self._request("eval", expression)

    def close(self) -> str:
        """Stop the child (idempotent); returns its stderr."""
        if self._stderr is not None:
            return self._stderr
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
                self.proc.kill()
                self.proc.wait()
        self._sel.close()
        self._stderr = self.proc.stderr.read() if self.proc.stderr else ""
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream and not stream.closed:
                try:
                    stream.close()
                except OSError:
                    pass
        return self._stderr


@pytest.fixture
def nvml_child() -> Iterator[Any]:
    """Factory: ``nvml_child(fake, setup="...")`` starts a child; all are stopped at teardown.

    A call that raises in the child raises ``nvml_child.Error`` (``ChildError``) here.
    """
    children: list[NvmlChild] = []

    def start(fake: fakenvml.FakeNvml, setup: str = "", **env: str) -> NvmlChild:
        child = NvmlChild({**fake.env, **env}, setup)
        children.append(child)
        return child

    start.Error = ChildError  # type: ignore[attr-defined]  # what a failing call raises
    yield start
    for child in children:
        child.close()
