"""A hostile tenant's tools against the monitor's region reader, for tests.

A container owns its cache directory, so it can swap the name the monitor is about to open for
something else at any instant: a device node it made with ``mknod`` (containerd allows that by
default), a FIFO, a symlink.  :class:`NameSwapper` does that as fast as the kernel allows (one
``renameat2(RENAME_EXCHANGE)`` per iteration, in a child process so it runs in parallel with the
reader), and :class:`OpenWatch` proves whether anybody opened the decoy: an inotify ``IN_OPEN``
watch on its inode (an ``O_PATH`` descriptor, which can neither read nor write, raises no
``IN_OPEN``).
"""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
import textwrap
from typing import IO

IN_OPEN = 0x00000020
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len

_SWAPPER = textwrap.dedent("""
    import ctypes, os, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    swap = libc.renameat2
    swap.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    a, b, deadline = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), time.monotonic() + float(sys.argv[3])
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    print("ready", flush=True)
    while time.monotonic() < deadline:  # a bound, should the test never stop it
        for _ in range(1000):
            if swap(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
                sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
""")


class NameSwapper:
    """A child process that exchanges two names (same directory) until :meth:`stop` or ``seconds``."""

    def __init__(self, a: str | os.PathLike[str], b: str | os.PathLike[str], seconds: float = 120.0):
        self.a, self.b = os.fspath(a), os.fspath(b)
        self.seconds = seconds
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> NameSwapper:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SWAPPER, self.a, self.b, str(self.seconds)], stdout=subprocess.PIPE, text=True
        )
        out: IO[str] | None = self.proc.stdout
        assert out is not None
        if out.readline().strip() != "ready":
            self.proc.wait()
            raise RuntimeError(f"the name swapper failed to start (exit status {self.proc.returncode})")
        return self

    def stop(self) -> None:
        """Kill it (the names may then be either way round)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.proc = None

    def __enter__(self) -> NameSwapper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OpenWatch:
    """Counts the opens (``IN_OPEN``) of one inode, whatever name it has meanwhile.

    inotify merges an event into an identical one still queued, so opens made back to back
    between two :meth:`count` calls may count once: the count is a lower bound, and 0 means none.
    """

    def __init__(self, path: str | os.PathLike[str]):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._fd = fd
        # IN_DONT_FOLLOW (0x02000000): watch the decoy itself, even if it is a symlink.
        if libc.inotify_add_watch(fd, os.fsencode(os.fspath(path)), IN_OPEN | 0x02000000) < 0:
            e = ctypes.get_errno()
            os.close(fd)
            raise OSError(e, os.strerror(e), os.fspath(path))
        self.opens = 0

    def count(self) -> int:
        """The opens seen so far (drains the queued events)."""
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return self.opens
            i = 0
            while i + _EVENT.size <= len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, i)
                if mask & IN_OPEN:
                    self.opens += 1
                i += _EVENT.size + length

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> OpenWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The sitecustomize of a monitor process (on its PYTHONPATH): the first os.open of the name
# VGPU_TEST_SWAP_TO_FIFO swaps that subdirectory for a FIFO just before the open runs -- the
# tenant's race between GC's listing (a directory) and its open, won every time.
SWAP_TO_FIFO_HOOK = textwrap.dedent(
    """
    import os, sys
    _target = os.environ.get("VGPU_TEST_SWAP_TO_FIFO", "")
    _name, _done = os.path.basename(_target), []
    def _swap(event, args):
        if event == "open" and not _done and _target and args[0] == _name:
            _done.append(True)
            os.rmdir(_target)
            os.mkfifo(_target)
    sys.addaudithook(_swap)
    """
)


def deep_tree(top: str | os.PathLike[str], depth: int, leaf: str | None = None) -> None:
    """``top/d/d/.../d`` (``depth`` levels), made through descriptors (no long paths); ``leaf``: an
    empty file of that name at the bottom."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        if leaf is not None:
            os.close(os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
