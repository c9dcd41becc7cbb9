"""Watch plumbing of the simulated API server: stored versions, change records, watchers.

A ``Stored`` is one immutable version of an object together with its cached JSON; every
write makes a new one, so LIST and WATCH can serialize without copying and without
holding references that a later write could change. A ``Watcher`` receives the changes
of one resource filtered through its selectors with the real cacher's rules: an object
that starts matching is ADDED, one that stops matching is DELETED (carrying its previous
content with the new resourceVersion), one that keeps matching is MODIFIED.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vgpu.sim.apiserver.selectors import FieldSelector, LabelSelector


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class Stored:
    """One version of an object. ``obj`` must never be mutated after construction."""

    obj: dict[str, Any]
    rv: int
    _item: bytes | None = field(default=None, repr=False)

    @property
    def namespace(self) -> str:
        return self.obj["metadata"].get("namespace", "")

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]

    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def item_bytes(self) -> bytes:
        """JSON as a list item: without kind and apiVersion, like the real server's lists."""
        if self._item is None:
            self._item = dumps({k: v for k, v in self.obj.items() if k not in ("kind", "apiVersion")})
        return self._item

    def full_bytes(self) -> bytes:
        head = dumps({"kind": self.obj.get("kind"), "apiVersion": self.obj.get("apiVersion")})
        body = self.item_bytes()
        return head[:-1] + (b"," + body[1:] if len(body) > 2 else b"}")

    def copy(self) -> dict[str, Any]:
        """A private deep copy for callers."""
        return json.loads(self.full_bytes())

    def with_rv(self, rv: int) -> Stored:
        obj = json.loads(self.full_bytes())
        obj["metadata"]["resourceVersion"] = str(rv)
        return Stored(obj, rv)


@dataclass(frozen=True)
class Change:
    """One committed write, kept in the bounded history for watch resumption."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: str  # storage key
    new: Stored  # for DELETED: the last content, stamped with the deletion's rv
    old: Stored | None


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK | ERROR
    stored: Stored | None = None
    rv: int = 0  # BOOKMARK
    error: dict[str, Any] | None = None  # ERROR: a Status object
    annotations: dict[str, str] | None = None  # BOOKMARK annotations (initial-events-end)


CLOSED = WatchEvent("CLOSED")

FieldGetter = Callable[[dict[str, Any], str], str]


class Watcher:
    """One open watch: a filtered, ordered queue of events fed by the store under its lock."""

    def __init__(
        self,
        resource: str,
        namespace: str | None,
        fields: FieldSelector,
        labels: LabelSelector,
        field_value: FieldGetter,
        max_queue: int = 100_000,
    ):
        self.resource = resource
        self.namespace = namespace or None
        self.fields = fields
        self.labels = labels
        self._field_value = field_value
        self._queue: collections.deque[WatchEvent] = collections.deque()
        self._cond = threading.Condition()
        self._max_queue = max_queue
        self.closed = False
        self.abrupt = False  # closed by a fault hook that wants the connection reset

    def matches(self, stored: Stored | None) -> bool:
        if stored is None:
            return False
        obj = stored.obj
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(obj["metadata"].get("labels")):
            return False
        if not self.fields.empty and not self.fields.matches(lambda key: self._field_value(obj, key)):
            return False
        return True

    def offer(self, change: Change) -> None:
        """Translate a change for this watcher (caller holds the store lock)."""
        if change.type == "DELETED":
            event = WatchEvent("DELETED", change.new) if self.matches(change.new) else None
        else:
            now, before = self.matches(change.new), self.matches(change.old)
            if now and before:
                event = WatchEvent("MODIFIED", change.new)
            elif now:
                event = WatchEvent("ADDED", change.new)
            elif before:
                assert change.old is not None
                event = WatchEvent("DELETED", change.old.with_rv(change.rv))
            else:
                event = None
        if event is not None:
            self.put(event)

    def put(self, event: WatchEvent) -> None:
        with self._cond:
            if self.closed:
                return
            if len(self._queue) >= self._max_queue:
                # A consumer this far behind is cut off, as the real cacher does; it re-lists.
                self.closed = True
                self._queue.clear()
            else:
                self._queue.append(event)
            self._cond.notify_all()

    def next(self, timeout: float) -> WatchEvent | None:
        """The next event, CLOSED once closed and drained, or None after ``timeout`` idle seconds."""
        with self._cond:
            if self.abrupt:
                return CLOSED
            if not self._queue and not self.closed:
                self._cond.wait(timeout)
            if self._queue:
                return self._queue.popleft()
            return CLOSED if self.closed else None

    def idle(self) -> bool:
        with self._cond:
            return not self._queue

    def close(self, abrupt: bool = False) -> None:
        with self._cond:
            self.closed = True
            self.abrupt = self.abrupt or abrupt
            self._cond.notify_all()
