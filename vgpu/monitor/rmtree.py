"""Removing a tenant-written directory tree: iterative, bounded, descriptor-relative (docs/metrics.md §6.3).

Why not ``shutil.rmtree``: it recurses once per level, so a 1,000-deep tree raises
``RecursionError`` (on every tick, for the whole node); it reads each directory's whole listing
into memory (+66 MB for 200,000 files); and it opens subdirectories with a plain ``O_RDONLY``,
so a FIFO swapped in for a subdirectory between its ``lstat`` and its ``open`` blocks the
caller forever.

Here:

- every directory is opened relative to its parent's descriptor with
  ``O_RDONLY|O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK``: a symlink, FIFO or any other non-directory
  fails at once (``ENOTDIR``/``ELOOP``) and is unlinked itself, never followed or opened;
- listings are streamed (``os.scandir(fd)``) and entries removed as they come
  (``os.unlink``/``os.rmdir`` with ``dir_fd``);
- the walk is a loop over an explicit stack of at most ``MAX_DEPTH`` open directories; a
  directory found deeper than that is renamed up into the top directory being removed (same
  tree, same file system) and removed from there, so depth costs neither recursion nor
  descriptors;
- a directory on another file system (a mount point) is never traversed;
- every loop step costs one unit of a caller-supplied :class:`Budget`; when it runs out the
  walk stops cleanly and reports ``DEFERRED``, and the next call picks up what is left.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_DEPTH = 32  # directories (descriptors) open at once during one removal
_RENAME_TRIES = 8
_seq = itertools.count()


class _Listing(Iterator[os.DirEntry[str]], Protocol):
    """What ``os.scandir(fd)`` returns (its class is private)."""

    def close(self) -> None: ...


class Outcome(Enum):
    DONE = "done"  # the entry is gone (removed by us)
    GONE = "gone"  # it had vanished before we got to it
    DEFERRED = "deferred"  # the budget ran out; call again
    STUCK = "stuck"  # a whole pass removed nothing more and the entry is still there


@dataclass
class Budget:
    """Work units (one per directory entry looked at, roughly one syscall) left for this tick."""

    left: int

    def spend(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


@dataclass
class Removal:
    outcome: Outcome
    removed: int = 0  # entries removed by this call (the top entry included)
    error: str = ""  # the first problem met, relative to the entry ("d/d/x: Permission denied")


@dataclass
class _Frame:
    fd: int
    name: str  # in the parent frame's directory
    path: str  # relative to the removed entry, for messages
    it: _Listing | None = None  # an open os.scandir(fd)
    progress: bool = False  # something was removed or moved since this listing began


class _Walk:
    def __init__(self, parent_fd: int, name: str, budget: Budget):
        self.parent_fd = parent_fd
        self.name = name
        self.budget = budget
        self.stack: list[_Frame] = []
        self.removed = 0
        self.error = ""
        self.dev = 0
        self.top_gone = False

    def note(self, path: str, text: str) -> None:
        if not self.error:
            self.error = f"{path}: {text}" if path else text

    def close(self) -> None:
        for f in self.stack:
            if f.it is not None:
                f.it.close()
            os.close(f.fd)
        self.stack = []

    def unlink(self, dir_fd: int, name: str, path: str) -> bool:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return True  # gone anyway
        except OSError as exc:
            self.note(path, exc.strerror or str(exc))
            return False
        self.removed += 1
        return True

    def run(self) -> Removal:
        try:
            top = os.open(self.name, DIR_FLAGS, dir_fd=self.parent_fd)
        except FileNotFoundError:
            return Removal(Outcome.GONE)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # a symlink, FIFO, file ...: the entry itself
                if not self.budget.spend():
                    return Removal(Outcome.DEFERRED)
                if self.unlink(self.parent_fd, self.name, ""):
                    return Removal(Outcome.DONE, self.removed)
            else:
                self.note("", exc.strerror or str(exc))
            return Removal(Outcome.STUCK, self.removed, self.error)
        self.dev = os.fstat(top).st_dev
        self.stack.append(_Frame(top, self.name, ""))
        try:
            return self._walk()
        finally:
            self.close()

    def _walk(self) -> Removal:
        while self.stack:
            if not self.budget.spend():
                return Removal(Outcome.DEFERRED, self.removed, self.error)
            f = self.stack[-1]
            if f.it is None:
                try:
                    f.it = os.scandir(f.fd)
                except OSError as exc:
                    self.note(f.path, f"cannot list: {exc.strerror}")
                    self._leave()
                    continue
            try:
                entry = next(f.it, None)
            except OSError as exc:
                self.note(f.path, f"cannot list: {exc.strerror}")
                entry = None
            if entry is None:
                f.it.close()
                f.it = None
                if f.progress:  # entries went while we listed: list again until a pass removes nothing
                    f.progress = False
                    continue
                self._leave()
                continue
            self._entry(f, entry)
        if self.top_gone:
            return Removal(Outcome.DONE, self.removed)
        return Removal(Outcome.STUCK, self.removed, self.error)

    def _leave(self) -> None:
        """Close the innermost directory and remove it from its parent."""
        f = self.stack.pop()
        if f.it is not None:
            f.it.close()
        os.close(f.fd)
        parent = self.stack[-1] if self.stack else None
        try:
            os.rmdir(f.name, dir_fd=self.parent_fd if parent is None else parent.fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.note(f.path or ".", exc.strerror or str(exc))
            return
        else:
            self.removed += 1
        if parent is not None:
            parent.progress = True
        else:
            self.top_gone = True

    def _entry(self, f: _Frame, entry: os.DirEntry[str]) -> None:
        path = f"{f.path}/{entry.name}" if f.path else entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)  # d_type (or an lstat): never follows
        except OSError:
            is_dir = False
        if not is_dir:
            if self.unlink(f.fd, entry.name, path):
                f.progress = True
            return
        if len(self.stack) >= MAX_DEPTH:
            self._move_up(f, entry.name, path)
            return
        try:
            fd = os.open(entry.name, DIR_FLAGS, dir_fd=f.fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # swapped for a symlink or a FIFO since the listing
                if self.unlink(f.fd, entry.name, path):
                    f.progress = True
            else:
                self.note(path, exc.strerror or str(exc))
            return
        try:
            if os.fstat(fd).st_dev != self.dev:
                self.note(path, "another file system is mounted here; not traversed")
                os.close(fd)
                return
        except OSError:
            os.close(fd)
            raise
        self.stack.append(_Frame(fd, entry.name, path))

    def _move_up(self, f: _Frame, name: str, path: str) -> None:
        """Rename a too-deep directory into the top directory, to be removed from there."""
        top = self.stack[0]
        for _ in range(_RENAME_TRIES):
            new = f".vgpu-gc-{os.getpid()}-{next(_seq)}"
            try:
                os.rename(name, new, src_dir_fd=f.fd, dst_dir_fd=top.fd)
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                    continue  # the tenant took that name: another one
                self.note(path, f"cannot move up: {exc.strerror}")
                return
            f.progress = True
            top.progress = True
            return
        self.note(path, "cannot move up: every temporary name is taken")


def remove_entry(parent_fd: int, name: str, budget: Budget) -> Removal:
    """Remove ``name`` (relative to ``parent_fd``) and everything under it, within ``budget``."""
    return _Walk(parent_fd, name, budget).run()
