"""Finding, tracking and garbage-collecting shared-region files (docs/metrics.md §6).

Everything under ``$HOOK_PATH/containers/<podUID>_<container>/`` is written by a workload
container, so it is untrusted: no path is ever followed through a symlink, FIFOs are never
opened for reading, counts are bounded, and only ``<root>/<name>`` entries whose name matches
the container pattern are ever removed.

One scan (every 5 s, and soon after an inotify event):

1. open the root with ``O_DIRECTORY|O_NOFOLLOW`` (created 0755 if missing; a symlinked root
   skips the scan with an error);
2. list at most 4,096 root entries; skip names that do not match
   ``^[0-9a-f-]{36}_<DNS-1123 label>$``; open each directory relative to the root fd with
   ``O_DIRECTORY|O_NOFOLLOW``;
3. in each directory consider at most 16 ``*.cache`` entries (not containing ``libvgpu.so``);
   reject symlinks, non-regular files and unknown sizes from their ``lstat``; try the rest from
   the newest mtime down — open relative to the directory fd (``O_RDWR|O_NOFOLLOW|O_NONBLOCK``,
   via :class:`vgpu.hamicore.region.Region`), decode once (magic, version) — and keep the first
   valid one.  A file whose magic is not set yet is *initialising*: not an error, retried next
   scan.  (Upstream fails a directory with more than 2 files: HAMi#863.)
4. keep the selected fd across scans; re-select when its size changed or another file is now
   the newest.

Directories that have no valid file are not tracked (nothing to export) and are looked at
again on the next scan.

Threading: scans and GC run in the monitor loop thread; scrapes read the tracked regions from
HTTP threads.  ``lock`` guards the region fds (a :class:`Region` reuses its output buffer), so
readers hold it while they read, and the loop takes it only to publish a new table and to close
the fds it dropped.  Listing and opening happen outside the lock.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vgpu.hamicore.layouts import FILE_SIZES, Layout
from vgpu.hamicore.paths import CONTAINERS_ROOT_MODE, parse_container_dir_name
from vgpu.hamicore.region import Region, RegionError, RegionErrorCode
from vgpu.monitor.pods import PodLookup

log = logging.getLogger(__name__)

MAX_ROOT_ENTRIES = 4096
MAX_CACHE_ENTRIES = 16
STALE_AFTER_S = 300.0
KNOWN_SIZES = frozenset(FILE_SIZES)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_LOGGED_NAMES_CAP = 4096

# Rejection reasons (label values of the self-metrics).
DIR_SYMLINK = "dir_symlink"
NOT_DIRECTORY = "not_directory"
DIR_OPEN = "dir_open"
SYMLINK = "symlink"
NOT_REGULAR = "not_regular"
SIZE = "size"

_CODE_REASON = {
    RegionErrorCode.SYMLINK: SYMLINK,
    RegionErrorCode.NOT_REGULAR: NOT_REGULAR,
    RegionErrorCode.SIZE: SIZE,
    RegionErrorCode.MAGIC: "magic",
    RegionErrorCode.VERSION: "version",
    RegionErrorCode.SHORT_READ: "short_read",
    RegionErrorCode.IO: "io",
    RegionErrorCode.OPEN: "open",
    RegionErrorCode.RACE: "race",
    RegionErrorCode.LAYOUT_CHANGED: "layout_changed",
    RegionErrorCode.ARG: "name",
}


@dataclass(eq=False)
class TrackedRegion:
    """The selected region file of one container directory."""

    dir_name: str
    pod_uid: str
    container: str
    file_name: str
    region: Region
    dev: int
    ino: int
    size: int
    mtime_ns: int
    layout: Layout
    labels: dict[Any, Any] = field(default_factory=dict)  # the collector's rendered-label cache

    @property
    def writable(self) -> bool:
        return self.region.writable


@dataclass
class ScanResult:
    """What one scan found (for self-metrics, logs and tests)."""

    ok: bool = True  # False: the root was unusable, nothing changed
    error: str = ""
    entries: int = 0  # root entries looked at (≤ 4,096)
    truncated: bool = False  # the root had more entries than that
    directories: int = 0  # matching names
    tracked: int = 0
    initialising: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # reason -> files now
    new_rejections: dict[str, int] = field(default_factory=dict)  # reason -> first seen this scan
    added: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


class Discovery:
    """Tracks one region per ``<podUID>_<container>`` directory under ``containers_root``."""

    def __init__(
        self,
        containers_root: str,
        *,
        clock: Callable[[], float] = time.time,
        on_directory: Callable[[str, int], None] | None = None,
    ):
        self.root = containers_root
        self.clock = clock
        self.on_directory = on_directory  # (dir name, dir fd) for every opened container dir (inotify)
        self.lock = threading.Lock()
        self.tracked: dict[str, TrackedRegion] = {}
        self._rejected_keys: set[tuple[str, str, int, str]] = set()
        self._logged_names: set[str] = set()
        self._root_state = ""

    # ------------------------------------------------------------------ root

    def _open_root(self, create: bool) -> int | None:
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.makedirs(os.path.dirname(self.root) or ".", exist_ok=True)
                os.mkdir(self.root, CONTAINERS_ROOT_MODE)
                fd = os.open(self.root, _DIR_FLAGS)
                if stat.S_IMODE(os.fstat(fd).st_mode) != CONTAINERS_ROOT_MODE:
                    os.fchmod(fd, CONTAINERS_ROOT_MODE)  # umask-proof, the plugin's mode (docs/metrics.md §6.1)
            except OSError as exc:
                self._root_problem(f"cannot create {self.root}: {exc.strerror}")
                return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                self._root_problem(f"{self.root} is a symbolic link or not a directory; refusing to scan it")
            else:
                self._root_problem(f"cannot open {self.root}: {exc.strerror}")
            return None
        if self._root_state:
            log.info("%s is usable again", self.root)
            self._root_state = ""
        return fd

    def _root_problem(self, text: str) -> None:
        if text != self._root_state:
            log.error("%s; skipping this scan", text)
            self._root_state = text

    def _matching_entries(self, root_fd: int) -> tuple[list[tuple[str, str, str]], int, bool]:
        """(name, pod uid, container) of matching root entries, entries seen, truncated."""
        out = []
        seen = 0
        truncated = False
        with os.scandir(root_fd) as it:
            for entry in it:
                if seen >= MAX_ROOT_ENTRIES:
                    truncated = True
                    break
                seen += 1
                parsed = parse_container_dir_name(entry.name)
                if parsed is None:
                    self._log_foreign(entry.name)
                    continue
                out.append((entry.name, *parsed))
        return out, seen, truncated

    def _log_foreign(self, name: str) -> None:
        if name not in self._logged_names and len(self._logged_names) < _LOGGED_NAMES_CAP:
            self._logged_names.add(name)
            log.warning("%s/%r is not a <podUID>_<container> entry; ignored (never removed)", self.root, name)

    # ------------------------------------------------------------------ scan

    def scan(self) -> ScanResult:
        result = ScanResult()
        root_fd = self._open_root(create=True)
        if root_fd is None:
            result.ok = False
            result.error = self._root_state
            return result
        rejected: list[tuple[str, str, int, str]] = []
        current = self.tracked
        new: dict[str, TrackedRegion] = {}
        try:
            entries, result.entries, result.truncated = self._matching_entries(root_fd)
            if result.truncated:
                log.warning(
                    "%s has more than %d entries; only the first %d are scanned",
                    self.root,
                    MAX_ROOT_ENTRIES,
                    MAX_ROOT_ENTRIES,
                )
            result.directories = len(entries)
            for name, uid, ctr in entries:
                kept = self._scan_dir(root_fd, name, uid, ctr, current.get(name), rejected, result)
                if kept is not None:
                    new[name] = kept
        finally:
            os.close(root_fd)
        self._publish(new, result)
        self._count_rejections(rejected, result)
        return result

    def _publish(self, new: dict[str, TrackedRegion], result: ScanResult) -> None:
        with self.lock:
            old, self.tracked = self.tracked, new
            for name, t in old.items():
                if new.get(name) is not t:
                    t.region.close()
        result.tracked = len(new)
        result.added = [n for n, t in new.items() if old.get(n) is not t]
        result.dropped = [n for n, t in old.items() if new.get(n) is not t]
        for n in result.added:
            log.info("tracking %s/%s", n, new[n].file_name)
        for n in result.dropped:
            if n not in new:
                log.info("no longer tracking %s", n)

    def _count_rejections(self, rejected: list[tuple[str, str, int, str]], result: ScanResult) -> None:
        keys = set(rejected)
        for key in keys:
            reason = key[3]
            result.rejected[reason] = result.rejected.get(reason, 0) + 1
            if key not in self._rejected_keys:
                result.new_rejections[reason] = result.new_rejections.get(reason, 0) + 1
        self._rejected_keys = keys

    def _reject(self, rejected: list, dir_name: str, file_name: str, ino: int, reason: str, detail: str) -> None:
        key = (dir_name, file_name, ino, reason)
        if key not in self._rejected_keys:
            log.warning("rejected %s/%s/%s: %s", self.root, dir_name, file_name, detail)
        rejected.append(key)

    def _scan_dir(
        self,
        root_fd: int,
        name: str,
        uid: str,
        ctr: str,
        current: TrackedRegion | None,
        rejected: list,
        result: ScanResult,
    ) -> TrackedRegion | None:
        try:
            dfd = os.open(name, _DIR_FLAGS, dir_fd=root_fd)
        except FileNotFoundError:
            return None  # vanished since the listing
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(name, root_fd):
                # O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR (or ELOOP)
                self._reject(rejected, name, "", 0, DIR_SYMLINK, "is a symbolic link (never followed)")
            elif exc.errno == errno.ENOTDIR:
                self._reject(rejected, name, "", 0, NOT_DIRECTORY, "is not a directory")
            else:
                self._reject(rejected, name, "", 0, DIR_OPEN, f"cannot open directory: {exc.strerror}")
            return None
        try:
            if self.on_directory is not None:
                self.on_directory(name, dfd)
            candidates: list[tuple[str, os.stat_result]] = []
            with os.scandir(dfd) as it:
                for entry in it:
                    n = entry.name
                    if not n.endswith(".cache") or "libvgpu.so" in n:
                        continue
                    if len(candidates) >= MAX_CACHE_ENTRIES:
                        break
                    try:
                        candidates.append((n, entry.stat(follow_symlinks=False)))
                    except OSError:
                        continue  # vanished
            usable = []
            for n, st in candidates:
                mode = st.st_mode
                if stat.S_ISLNK(mode):
                    self._reject(rejected, name, n, st.st_ino, SYMLINK, "is a symbolic link (never followed)")
                elif not stat.S_ISREG(mode):
                    self._reject(rejected, name, n, st.st_ino, NOT_REGULAR, "is not a regular file")
                elif st.st_size not in KNOWN_SIZES:
                    self._reject(
                        rejected, name, n, st.st_ino, SIZE, f"size {st.st_size} is none of the known region sizes"
                    )
                else:
                    usable.append((n, st))
            usable.sort(key=lambda x: x[1].st_mtime_ns, reverse=True)
            for n, st in usable:
                if (
                    current is not None
                    and current.file_name == n
                    and current.ino == st.st_ino
                    and current.dev == st.st_dev
                ):
                    try:
                        fst = current.region.stat()
                    except RegionError:
                        fst = None
                    if fst is not None and fst.st_size == current.size and fst.st_ino == current.ino:
                        current.mtime_ns = fst.st_mtime_ns
                        return current
                picked = self._open_region(dfd, name, uid, ctr, n, rejected, result)
                if picked is not None:
                    return picked
            return None
        except OSError as exc:
            self._reject(rejected, name, "", 0, DIR_OPEN, f"cannot list directory: {exc.strerror}")
            return None
        finally:
            os.close(dfd)

    def _open_region(
        self, dfd: int, dir_name: str, uid: str, ctr: str, file_name: str, rejected: list, result: ScanResult
    ) -> TrackedRegion | None:
        try:
            try:
                region = Region.open(file_name, dir_fd=dfd, writable=True)
            except RegionError as exc:
                if exc.code is not RegionErrorCode.OPEN or exc.errno not in (errno.EACCES, errno.EROFS, errno.EPERM):
                    raise
                region = Region.open(file_name, dir_fd=dfd, writable=False)
                log.warning(
                    "%s/%s/%s is not writable (%s); metrics only, no feedback",
                    self.root,
                    dir_name,
                    file_name,
                    exc.detail,
                )
        except RegionError as exc:
            if exc.code is not RegionErrorCode.NOT_FOUND:
                self._reject(rejected, dir_name, file_name, 0, _CODE_REASON.get(exc.code, "open"), exc.detail)
            return None
        ino = 0
        try:
            fst = region.stat()
            ino = fst.st_ino
            snap = region.read()
        except RegionError as exc:
            region.close()
            if exc.code is RegionErrorCode.UNINITIALISED:
                result.initialising += 1
            else:
                self._reject(rejected, dir_name, file_name, ino, _CODE_REASON.get(exc.code, "io"), exc.detail)
            return None
        return TrackedRegion(
            dir_name, uid, ctr, file_name, region, fst.st_dev, fst.st_ino, fst.st_size, fst.st_mtime_ns, snap.layout
        )

    # ------------------------------------------------------------------ GC

    def collect_garbage(self, pods: PodLookup) -> list[str]:
        """Remove stale ``<podUID>_<ctr>`` entries (docs/metrics.md §6.3); returns the removed names.

        Stale: the pod list is synced, no pod has that UID (or it is Succeeded/Failed), and
        the entry's own ``lstat`` mtime is more than 300 s old.  Removal is fd-relative and
        never follows a symlink: a symlink (or other non-directory) is unlinked itself.
        """
        if not pods.synced:
            return []
        root_fd = self._open_root(create=False)
        if root_fd is None:
            return []
        removed: list[str] = []
        now = self.clock()
        try:
            entries, _, _ = self._matching_entries(root_fd)
            for name, uid, _ctr in entries:
                pod = pods.get(uid)
                if pod is not None and not pod.terminal:
                    continue
                try:
                    st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if now - st.st_mtime <= STALE_AFTER_S:
                    continue
                self._untrack(name)
                try:
                    if stat.S_ISDIR(st.st_mode):
                        shutil.rmtree(name, dir_fd=root_fd)
                    else:
                        os.unlink(name, dir_fd=root_fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning("cannot remove stale %s/%s: %s", self.root, name, exc)
                    continue
                removed.append(name)
                log.info(
                    "removed stale %s/%s (pod %s)",
                    self.root,
                    name,
                    "gone" if pod is None else f"{pod.namespace}/{pod.name} terminated",
                )
        finally:
            os.close(root_fd)
        return removed

    def _untrack(self, name: str) -> None:
        with self.lock:
            t = self.tracked.get(name)
            if t is not None:
                self.tracked = {k: v for k, v in self.tracked.items() if k != name}
                t.region.close()  # the region fd is closed before the directory goes

    def close(self) -> None:
        with self.lock:
            for t in self.tracked.values():
                t.region.close()
            self.tracked = {}


def _is_symlink(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
