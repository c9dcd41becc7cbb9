"""A minimal inotify binding (ctypes on libc) so discovery reacts to new directories and files at once.

Optional by design: where inotify is unavailable (no libc symbol, ``ENOSYS``, watch limit
reached) the monitor still finds everything on its 5-second scan.  Events only *wake* a scan;
they are never trusted for what they say about the files.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import struct
from dataclasses import dataclass

log = logging.getLogger(__name__)

IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# Not IN_CLOSE_WRITE / IN_MODIFY: the monitor's own opens, closes and feedback pwrites would wake
# it again and again.  A new file shows up as IN_CREATE (its magic comes later, through mmap).
DIR_EVENTS = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len
MAX_READ_BYTES = 1 << 20  # per read_events() call: ~30,000 events


@dataclass(frozen=True, slots=True)
class Event:
    wd: int
    mask: int
    name: str


class Inotify:
    """One non-blocking inotify instance.  Use :meth:`create`; returns None where unsupported."""

    def __init__(self, fd: int, libc: ctypes.CDLL):
        self._fd = fd
        self._libc = libc

    @classmethod
    def create(cls) -> Inotify | None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            init = libc.inotify_init1
            libc.inotify_add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
            libc.inotify_rm_watch.argtypes = (ctypes.c_int, ctypes.c_int)
        except (OSError, AttributeError) as exc:
            log.info("inotify is not available (%s); relying on the periodic scan", exc)
            return None
        fd = init(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            log.info("inotify_init1 failed (%s); relying on the periodic scan", os.strerror(ctypes.get_errno()))
            return None
        return cls(fd, libc)

    def fileno(self) -> int:
        return self._fd

    def add_watch(self, path: str, mask: int) -> int:
        """Watch descriptor; raises ``OSError`` (e.g. ``ENOSPC`` at the watch limit)."""
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)
        return wd

    def rm_watch(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self._fd, wd)  # EINVAL for an already-gone watch is fine

    def read_events(self, max_bytes: int = MAX_READ_BYTES) -> list[Event]:
        """Queued events, at most about ``max_bytes`` of them per call (never blocks).

        Bounded so that a tenant creating files as fast as it can never keeps the loop here;
        what is left stays queued (the descriptor stays readable) for the next call.
        """
        events: list[Event] = []
        total = 0
        while total < max_bytes:
            try:
                data = os.read(self._fd, max(4096, min(65536, max_bytes - total)))  # ≥ one event
            except BlockingIOError:
                return events
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            if not data:
                return events
            total += len(data)
            pos = 0
            while pos + _HEADER.size <= len(data):
                wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
                pos += _HEADER.size
                raw = data[pos : pos + length]
                pos += length
                events.append(Event(wd, mask, raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")))
        return events

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
