"""Drive the fake NVML through nvidia-ml-py in child processes.

pynvml keeps one library per process and the fake keeps its config, event cursors
and MIG cache per process, so each test talks to its own Python child started with
the fake's environment.  The child executes/evaluates one request per line and
answers one JSON line; an NVML error comes back as its code, so tests can assert
return codes exactly.  The child's stderr goes to a file the test can read at any
time (the fake reports config problems there).
"""

from __future__ import annotations

import json
import pathlib
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import REPO_ROOT, python_child_env

CHILD = r"""
import ctypes, json, sys, threading, time, traceback
import pynvml as p
from vgpu.nvml.library import init_pynvml

def plain(v):
    if isinstance(v, ctypes.Structure):
        return {name: plain(getattr(v, name)) for name, *_ in v._fields_}
    if isinstance(v, ctypes.Array):
        return [plain(x) for x in v]
    if isinstance(v, ctypes._Pointer) or isinstance(v, ctypes.c_void_p):
        return ctypes.cast(v, ctypes.c_void_p).value
    if isinstance(v, ctypes._SimpleCData):
        return plain(v.value)
    if isinstance(v, p.nvmlFriendlyObject):
        return {k: plain(x) for k, x in vars(v).items()}
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    return v

def addr(handle):
    return ctypes.cast(handle, ctypes.c_void_p).value

ns = {"p": p, "ctypes": ctypes, "threading": threading, "time": time, "plain": plain, "addr": addr,
      "init_pynvml": init_pynvml, "LIB": sys.argv[1]}
for line in sys.stdin:
    req = json.loads(line)
    try:
        if "exec" in req:
            exec(req["exec"], ns)
            out = {"value": None}
        else:
            out = {"value": plain(eval(req["eval"], ns))}
    except p.NVMLError as exc:
        out = {"nvml_error": exc.value}
    except Exception as exc:
        out = {"error": repr(exc), "trace": traceback.format_exc()}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


class NvmlError(Exception):
    """An NVML error raised in the child."""

    def __init__(self, code: int) -> None:
        super().__init__(f"NVML error {code}")
        self.code = code


class PynvmlChild:
    """A Python process with the fake's env; ``init`` loads the fake and calls nvmlInit."""

    def __init__(
        self,
        fake: fakenvml.FakeNvml,
        stderr_path: pathlib.Path,
        *,
        init: bool = True,
        env: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.timeout = timeout
        self.stderr_path = stderr_path
        full_env = python_child_env({**fake.env, **(env or {})})
        self._stderr = open(stderr_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", CHILD, str(fake.library)],
            env=full_env,
            cwd=str(REPO_ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        if init:
            self.run("init_pynvml(LIB)")

    def send(self, kind: str, code: str) -> None:
        """Send a request without waiting for the answer (see ``receive``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({kind: code}) + "\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float | None = None) -> Any:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._sel.select(max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                raise TimeoutError("the child did not answer in time")
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=5)
            raise RuntimeError(f"child exited ({self.proc.returncode}): {self.stderr()}")
        answer = json.loads(line)
        if "nvml_error" in answer:
            raise NvmlError(answer["nvml_error"])
        if "error" in answer:
            raise RuntimeError(f"child raised {answer['error']}\n{answer['trace']}")
        return answer["value"]

    def run(self, statements: str) -> None:
        self.send("exec", statements)
        self.receive()

    def eval(self, expression: str) -> Any:
        self.send("eval", expression)
        return self.receive()

    def rc(self, expression: str) -> int:
        """The NVML return code of evaluating ``expression`` (0 when it succeeds)."""
        try:
            self.eval(expression)
        except NvmlError as exc:
            return exc.code
        return 0

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait()
        self._sel.close()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._stderr.close()


@pytest.fixture
def pynvml_child(tmp_path: pathlib.Path) -> Iterator[Any]:
    """Factory ``pynvml_child(fake, init=True, env=None)``; every child is stopped at teardown."""
    children: list[PynvmlChild] = []

    def start(fake: fakenvml.FakeNvml, *, init: bool = True, env: dict[str, str] | None = None) -> PynvmlChild:
        child = PynvmlChild(fake, tmp_path / f"child{len(children)}.stderr", init=init, env=env)
        children.append(child)
        return child

    yield start
    for child in children:
        child.close()


def _run_init(fake: fakenvml.FakeNvml, env: dict[str, str] | None = None) -> tuple[int, str]:
    """nvmlInit in a fresh process: (NVML return code, stderr)."""
    full_env = python_child_env({**fake.env, **(env or {})})
    script = (
        "import sys, pynvml\n"
        "from vgpu.nvml.library import init_pynvml\n"
        "try:\n"
        "    init_pynvml(sys.argv[1])\n"
        "except pynvml.NVMLError as e:\n"
        "    print(e.value)\n"
        "else:\n"
        "    print(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(fake.library)],
        env=full_env,
        cwd=str(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip()), done.stderr


@pytest.fixture
def nvml_init() -> Any:
    """``nvml_init(fake, env=None)`` -> (return code of nvmlInit in a fresh process, its stderr)."""
    return _run_init
