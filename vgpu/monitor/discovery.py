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
3. in each directory stream at most 256 entries of any name (plus the tracked file, looked up by
   name), and consider at most 16 ``*.cache`` entries among them (not containing ``libvgpu.so``);
   reject symlinks, non-regular files and unknown sizes from their ``lstat``; try the rest from
   the newest mtime down — open relative to the directory fd (``O_RDWR|O_NOFOLLOW|O_NONBLOCK``,
   via :class:`vgpu.hamicore.region.Region`), decode once (magic, version) — and keep the first
   valid one.  A file whose magic is not set yet is *initialising*: not an error, retried next
   scan.  (Upstream fails a directory with more than 2 files: HAMi#863.)
4. keep the selected fd across scans; re-select when its size changed or another file is now
   the newest.

Directories that have no valid file are not tracked (nothing to export) and are looked at
again on the next scan.  An unexpected exception in one directory is logged with its path and
counted; the scan goes on with the others.

GC (docs/metrics.md §6.3) removes stale entries with :func:`vgpu.monitor.rmtree.remove_entry`:
iterative, descriptor-relative, never opening a non-directory, within a per-tick work budget; an
unfinished removal continues on the next ticks and its entry is not scanned meanwhile.

Threading: scans and GC run in the monitor loop thread; scrapes read the tracked regions from
HTTP threads.  ``lock`` guards the region fds (a :class:`Region` reuses its output buffer), so
readers hold it while they read, and the loop takes it only to publish a new table and to close
the fds it dropped.  Listing and opening happen outside the lock.
"""

from __future__ import annotations

import errno
import logging
import os
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
from vgpu.monitor.rmtree import Budget, Outcome, remove_entry

log = logging.getLogger(__name__)

MAX_ROOT_ENTRIES = 4096
MAX_DIR_ENTRIES = 256  # entries of any name looked at per container directory per scan
MAX_CACHE_ENTRIES = 16
GC_WORK_BUDGET = 10_000  # directory entries GC may look at per tick (rmtree.Budget)
STALE_AFTER_S = 300.0
KNOWN_SIZES = frozenset(FILE_SIZES)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_LOGGED_NAMES_CAP = 4096
_LOGGED_ERRORS_CAP = 1024

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
REJECT_REASONS = (DIR_SYMLINK, NOT_DIRECTORY, DIR_OPEN, *dict.fromkeys(_CODE_REASON.values()))
"""Every rejection reason, so each is exported from the start at zero (docs/metrics.md §8)."""


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
    truncated_dirs: int = 0  # container directories whose listing stopped at MAX_DIR_ENTRIES
    item_errors: int = 0  # directories whose scan raised unexpectedly (logged, skipped)
    tracked: int = 0
    initialising: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # reason -> files now
    new_rejections: dict[str, int] = field(default_factory=dict)  # reason -> first seen this scan
    added: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


@dataclass
class GcResult:
    """What one GC pass did (for self-metrics, logs and tests)."""

    removed: list[str] = field(default_factory=list)
    deferred: bool = False  # the work budget ran out with removals left for the next tick
    pending: int = 0  # stale entries whose removal is not finished (deferred or stuck)
    item_errors: int = 0  # entries whose GC raised unexpectedly (logged, skipped)
    work: int = 0  # budget units spent


@dataclass
class _Pending:
    """A stale entry whose removal did not finish: continued on later ticks, whatever its mtime."""

    last_tick: int = 0  # the GC pass that last worked on it (least recently worked goes first)
    retry_at: float = 0.0  # stuck: not before this (clock time)
    logged: bool = False


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
        self._logged_errors: set[tuple[str, str]] = set()
        self._logged_truncated: set[str] = set()
        self._root_state = ""
        self._gc_pending: dict[str, _Pending] = {}
        self._gc_passes = 0

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

    def _item_error(self, what: str, name: str, exc: BaseException) -> None:
        """An unexpected exception confined to one entry: logged (once per entry and kind) with its path."""
        key = (name, type(exc).__name__)
        if key not in self._logged_errors and len(self._logged_errors) < _LOGGED_ERRORS_CAP:
            self._logged_errors.add(key)
            log.error("%s of %s/%r failed; skipped, the rest goes on", what, self.root, name, exc_info=exc)

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
                if name in self._gc_pending:
                    continue  # being removed: nothing to track there
                try:
                    kept = self._scan_dir(root_fd, name, uid, ctr, current.get(name), rejected, result)
                except Exception as exc:  # noqa: BLE001 - one directory must never stop the scan
                    result.item_errors += 1
                    self._item_error("scanning", name, exc)
                    continue
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
            candidates = self._candidates(dfd, name, current, result)
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

    def _candidates(
        self, dfd: int, name: str, current: TrackedRegion | None, result: ScanResult
    ) -> list[tuple[str, os.stat_result]]:
        """``(name, lstat)`` of at most 16 ``*.cache`` entries among the first 256 entries listed.

        The listing is streamed and stops at ``MAX_DIR_ENTRIES`` whatever the names, so a
        directory full of junk costs a bounded scan.  The tracked file is looked up by name
        as well, so junk listed before it cannot make the monitor lose it.
        """
        candidates: list[tuple[str, os.stat_result]] = []
        seen = 0
        with os.scandir(dfd) as it:
            for entry in it:
                if seen >= MAX_DIR_ENTRIES:
                    result.truncated_dirs += 1
                    if name not in self._logged_truncated and len(self._logged_truncated) < _LOGGED_NAMES_CAP:
                        self._logged_truncated.add(name)
                        log.warning(
                            "%s/%s has more than %d entries; only the first %d are looked at each scan",
                            self.root,
                            name,
                            MAX_DIR_ENTRIES,
                            MAX_DIR_ENTRIES,
                        )
                    break
                seen += 1
                n = entry.name
                if not n.endswith(".cache") or "libvgpu.so" in n:
                    continue
                if len(candidates) >= MAX_CACHE_ENTRIES:
                    break
                try:
                    candidates.append((n, entry.stat(follow_symlinks=False)))
                except OSError:
                    continue  # vanished
        if current is not None and all(n != current.file_name for n, _ in candidates):
            try:
                candidates.append((current.file_name, os.stat(current.file_name, dir_fd=dfd, follow_symlinks=False)))
            except OSError:
                pass  # gone: re-select among the others
        return candidates

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

    def collect_garbage(self, pods: PodLookup, budget: int | None = None) -> GcResult:
        """Remove stale ``<podUID>_<ctr>`` entries (docs/metrics.md §6.3) within a work budget.

        Stale: the pod list is synced, no pod has that UID (or it is Succeeded/Failed), and
        the entry's own ``lstat`` mtime is more than 300 s old.  Removal is
        :func:`vgpu.monitor.rmtree.remove_entry`: iterative, descriptor-relative, never
        following a symlink nor opening a non-directory; what the budget does not cover this
        tick is continued on the next ones (least recently worked first), whatever the
        entry's mtime is by then.  An exception in one entry is logged and counted, and the
        others are still collected.
        """
        result = GcResult()
        if not pods.synced:
            result.pending = len(self._gc_pending)
            return result
        root_fd = self._open_root(create=False)
        if root_fd is None:
            result.pending = len(self._gc_pending)
            return result
        self._gc_passes += 1
        budget = GC_WORK_BUDGET if budget is None else budget
        work = Budget(budget)
        try:
            entries, _, _ = self._matching_entries(root_fd)
            listed = {name for name, _, _ in entries}
            for name in [n for n in self._gc_pending if n not in listed]:
                del self._gc_pending[name]  # gone (or beyond the listing cap)

            def order(e: tuple[str, str, str]) -> tuple[int, int]:
                p = self._gc_pending.get(e[0])
                return (0, p.last_tick) if p is not None else (1, 0)

            for name, uid, _ctr in sorted(entries, key=order):
                try:
                    self._collect_one(root_fd, name, uid, pods, work, result)
                except Exception as exc:  # noqa: BLE001 - one entry must never stop GC (or the tick)
                    result.item_errors += 1
                    self._item_error("garbage-collecting", name, exc)
        finally:
            os.close(root_fd)
        result.work = budget - work.left
        result.pending = len(self._gc_pending)
        return result

    def _collect_one(self, root_fd: int, name: str, uid: str, pods: PodLookup, work: Budget, result: GcResult) -> None:
        pod = pods.get(uid)
        if pod is not None and not pod.terminal:
            self._gc_pending.pop(name, None)
            return
        now = self.clock()
        pending = self._gc_pending.get(name)
        if pending is None:
            try:
                st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
            except FileNotFoundError:
                return
            if now - st.st_mtime <= STALE_AFTER_S:
                return
        elif now < pending.retry_at:
            return
        if work.left <= 0:
            result.deferred = True
            self._gc_pending.setdefault(name, _Pending())
            return
        self._untrack(name)  # the region fd is closed before the directory goes
        removal = remove_entry(root_fd, name, work)
        if removal.outcome in (Outcome.DONE, Outcome.GONE):
            self._gc_pending.pop(name, None)
            if removal.outcome is Outcome.DONE:
                result.removed.append(name)
                log.info(
                    "removed stale %s/%s (pod %s)",
                    self.root,
                    name,
                    "gone" if pod is None else f"{pod.namespace}/{pod.name} terminated",
                )
            return
        p = self._gc_pending.setdefault(name, _Pending())
        p.last_tick = self._gc_passes
        if removal.outcome is Outcome.DEFERRED:
            result.deferred = True
            p.retry_at = 0.0
            if not p.logged:
                p.logged = True
                log.info(
                    "removing stale %s/%s over several ticks (%d entries per tick)", self.root, name, GC_WORK_BUDGET
                )
            return
        p.retry_at = now + STALE_AFTER_S  # stuck: try again in 5 minutes
        log.warning(
            "cannot remove stale %s/%s completely (%s); retrying in %.0f s",
            self.root,
            name,
            removal.error,
            STALE_AFTER_S,
        )

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
