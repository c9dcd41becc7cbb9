"""A LIST+WATCH cache of one kind of object (an informer without the generated models).

Used for this node's pods (``fieldSelector=spec.nodeName=<node>``, docs/protocol.md §5.1)
and for this Node itself (the registrar, docs/protocol.md §2.1–§2.2).  Why our own: Allocate needs the pods as
plain dicts within microseconds, and must be able to write a PATCH response through at once
(the next container's Allocate follows within milliseconds; the watch may lag).

Behaviour:
- LIST, then WATCH from the list's resourceVersion with bookmarks; a watch that ends cleanly
  (server timeout) is resumed from the last seen resourceVersion.
- 410 Gone, an ERROR event or any watch failure → re-LIST (resync), after a backoff
  (0.2 s doubling to 5 s) when the API server is unreachable.  The cache keeps serving its
  last state meanwhile; ``synced`` says whether it is current.
- ``upsert`` (write-through) and events never move an object back to an older
  resourceVersion, so a lagging watch cannot undo a PATCH response we already applied.
- ``resync()`` does one synchronous LIST in the caller's thread (Allocate's "no candidate →
  resync once", docs/protocol.md §5.2 step 2).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from vgpu.kube.client import KubeApiError, KubeError, ListResult, WatchStream

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Listener = Callable[[str, Obj], None]
"""Called with ("ADDED"|"MODIFIED"|"DELETED"|"SYNC", object) after the cache changed."""

BACKOFF_FIRST_S = 0.2
BACKOFF_CAP_S = 5.0
CHANGE_LOG = 4096  # keys of the last changes kept for changed_since(); older readers re-read everything


def resource_version_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def newer_or_equal(a: str, b: str) -> bool:
    """True when resourceVersion ``a`` is not older than ``b``.

    resourceVersions are opaque strings, but every real and simulated API server uses etcd
    revisions (decimal integers); anything else is treated as "newer" so it is never dropped.
    """
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


def uid_key(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def name_key(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class WatchCache:
    """Objects by key, kept current by a LIST+WATCH loop in a background thread."""

    def __init__(
        self,
        what: str,
        list_fn: Callable[[], ListResult],
        watch_fn: Callable[[str], WatchStream],
        *,
        key: Callable[[Obj], str] = uid_key,
        listener: Listener | None = None,
    ):
        self.what = what
        self._list_fn = list_fn
        self._watch_fn = watch_fn
        self._key = key
        self._listener = listener
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self._objects: dict[str, Obj] = {}
        self._rv = ""
        self._synced = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: WatchStream | None = None
        self.lists = 0  # LISTs done (initial + resyncs), for logs and tests
        self.watch_errors = 0
        self.version = 0  # bumps on every change; tests wait on it
        self._log: deque[tuple[int, str]] = deque(maxlen=CHANGE_LOG)  # (version after, key) per change
        self._log_floor = 0  # changed_since() answers for versions >= this (a LIST resets it)

    # ---------------------------------------------------------------- reading

    def items(self) -> list[Obj]:
        """A snapshot of the cached objects (treat them as read-only)."""
        with self._lock:
            return list(self._objects.values())

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._objects.get(key)

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._objects)

    def changed_since(self, version: int) -> tuple[int, dict[str, Obj | None]] | None:
        """(current version, {key: object, or None when gone}) of what changed after ``version``.

        None when the change log does not reach back that far (a re-LIST, or more than
        ``CHANGE_LOG`` changes since): read :meth:`items` instead.  Lets a reader keep an index
        of the objects that costs per change, not per object.
        """
        with self._lock:
            if version < self._log_floor or version > self.version:
                return None
            if version < self.version and (not self._log or self._log[0][0] > version + 1):
                return None
            keys: set[str] = set()
            for v, k in reversed(self._log):
                if v <= version:
                    break
                keys.add(k)
            return self.version, {k: self._objects.get(k) for k in keys}

    @property
    def synced(self) -> bool:
        return self._synced

    @property
    def resource_version(self) -> str:
        return self._rv

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._synced:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True

    def wait_for(self, predicate: Callable[[WatchCache], bool], timeout: float) -> bool:
        """Wait (woken by every change, no polling) until ``predicate(self)`` holds; False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                seen = self.version
            if predicate(self):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._lock:
                if self.version == seen:
                    self.changed.wait(left)

    # ---------------------------------------------------------------- writing

    def upsert(self, obj: Obj) -> bool:
        """Write an object through (e.g. a PATCH response); ignored if we hold a newer version."""
        return self._apply("MODIFIED", obj)

    def _apply(self, kind: str, obj: Obj) -> bool:
        key = self._key(obj)
        if not key:
            return False
        rv = resource_version_of(obj)
        with self._lock:
            cur = self._objects.get(key)
            if cur is not None and not newer_or_equal(rv, resource_version_of(cur)):
                return False
            if kind == "DELETED":
                if cur is None:
                    return False
                del self._objects[key]
            else:
                if cur is not None and resource_version_of(cur) == rv and rv:
                    return False
                self._objects[key] = obj
            self.version += 1
            self._log.append((self.version, key))
            self.changed.notify_all()
        self._notify(kind, obj)
        return True

    def _notify(self, kind: str, obj: Obj) -> None:
        if self._listener is None:
            return
        try:
            self._listener(kind, obj)
        except Exception:  # noqa: BLE001 - a listener bug must not kill the watch loop
            log.exception("%s: listener failed on %s", self.what, kind)

    def resync(self) -> None:
        """One LIST in the caller's thread; replaces the contents (keeping newer write-throughs).

        Raises :class:`KubeError` when the LIST fails (the cache keeps its old state).
        """
        result = self._list_fn()
        self._replace(result)

    def _replace(self, result: ListResult) -> None:
        fresh = {self._key(o): o for o in result.items if self._key(o)}
        removed: list[Obj] = []
        with self._lock:
            for key, cur in self._objects.items():
                new = fresh.get(key)
                if new is None:
                    # Absent from the LIST: deleted, unless we wrote through something newer.
                    if result.resource_version and newer_or_equal(result.resource_version, resource_version_of(cur)):
                        removed.append(cur)
                    else:
                        fresh[key] = cur
                elif not newer_or_equal(resource_version_of(new), resource_version_of(cur)):
                    fresh[key] = cur
            self._objects = fresh
            self._rv = result.resource_version
            self._synced = True
            self.lists += 1
            self.version += 1
            self._log.clear()
            self._log_floor = self.version
            self.changed.notify_all()
        for obj in removed:
            self._notify("DELETED", obj)
        self._notify("SYNC", {})

    # ---------------------------------------------------------------- the loop

    def start(self) -> WatchCache:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"watch-{self.what}", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        backoff = BACKOFF_FIRST_S
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.resync()
                    need_list = False
                    backoff = BACKOFF_FIRST_S
                need_list = self._watch_once()
                if not need_list:
                    backoff = BACKOFF_FIRST_S
                    continue
            except KubeApiError as exc:
                need_list = True
                self.watch_errors += 1
                if self._stop.is_set():
                    return
                log.warning("%s: %s; re-listing", self.what, exc)
                if not exc.gone:
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, BACKOFF_CAP_S)
            except KubeError as exc:
                need_list = True
                self.watch_errors += 1
                if self._stop.is_set():
                    return
                log.warning("%s: %s; retrying in %.1f s", self.what, exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_CAP_S)
            except Exception:  # noqa: BLE001 - the cache must outlive any surprise
                need_list = True
                self.watch_errors += 1
                log.exception("%s: unexpected watch failure; re-listing", self.what)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_CAP_S)

    def _watch_once(self) -> bool:
        """Follow one watch until it ends; True when a re-LIST is needed."""
        stream = self._watch_fn(self._rv)
        self._stream = stream
        try:
            if self._stop.is_set():
                return False
            for event in stream:
                if self._stop.is_set():
                    return False
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = obj.get("code")
                    self.watch_errors += 1
                    log.info("%s: watch error %s (%s); re-listing", self.what, code, obj.get("message", ""))
                    return True
                rv = resource_version_of(obj)
                if kind == "BOOKMARK":
                    if rv:
                        self._rv = rv
                    continue
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._apply(kind, obj)
                    if rv:
                        self._rv = rv
            return False
        finally:
            self._stream = None
            stream.close()
