"""Fault injection and request accounting for the simulated API server.

Reliability tests need an API server that misbehaves on cue ("the next 3 node PATCHes get
500", "every pod LIST hangs 2 s", "reset the connection of the next binding") and a ledger
of what the code under test sent ("at most 2 node writes per simulated minute"). Both live
here so the HTTP layer only calls ``Faults.take`` and ``RequestLog.add``.

Patterns are ``fnmatch`` globs on the verb (get, list, watch, create, update, patch, delete,
deletecollection), the resource (``pods``, ``pods/status``, ``pods/binding``, ``nodes``;
``pods*`` matches the resource and its subresources), the namespace and the name.
"""

from __future__ import annotations

import collections
import fnmatch
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def _match(pattern: str | None, value: str | None) -> bool:
    return pattern is None or fnmatch.fnmatchcase(value or "", pattern)


@dataclass
class FaultRule:
    """One injected misbehaviour. ``status`` 0 resets the connection instead of answering."""

    verb: str = "*"
    resource: str = "*"
    namespace: str | None = None
    name: str | None = None
    status: int | None = 500  # None: no error, only ``delay``
    count: int | None = 1  # None: until cleared
    delay: float = 0.0
    message: str | None = None
    reason: str | None = None
    retry_after: int | None = None
    hits: int = 0

    def matches(self, verb: str, resource: str, namespace: str | None, name: str | None) -> bool:
        return (
            _match(self.verb, verb)
            and _match(self.resource, resource)
            and _match(self.namespace, namespace)
            and _match(self.name, name)
        )

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count


class Faults:
    """The rules in force; the first matching rule with hits left applies to a request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def fail(
        self,
        verb: str = "*",
        resource: str = "*",
        *,
        status: int = 500,
        count: int | None = 1,
        namespace: str | None = None,
        name: str | None = None,
        message: str | None = None,
        reason: str | None = None,
        retry_after: int | None = None,
        delay: float = 0.0,
    ) -> FaultRule:
        """Answer the next ``count`` matching requests with ``status`` (a real Status body)."""
        return self.add(FaultRule(verb, resource, namespace, name, status, count, delay, message, reason, retry_after))

    def delay(
        self,
        seconds: float,
        verb: str = "*",
        resource: str = "*",
        *,
        count: int | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> FaultRule:
        """Delay matching requests by ``seconds`` and then serve them normally."""
        return self.add(FaultRule(verb, resource, namespace, name, None, count, seconds))

    def reset_connection(
        self,
        verb: str = "*",
        resource: str = "*",
        *,
        count: int | None = 1,
        namespace: str | None = None,
        name: str | None = None,
    ) -> FaultRule:
        """Close the connection of matching requests without any answer."""
        return self.add(FaultRule(verb, resource, namespace, name, 0, count))

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: FaultRule) -> None:
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def take(self, verb: str, resource: str, namespace: str | None, name: str | None) -> FaultRule | None:
        """The rule to apply to this request (its hit is counted), or None."""
        with self._lock:
            for rule in self._rules:
                if not rule.exhausted and rule.matches(verb, resource, namespace, name):
                    rule.hits += 1
                    if rule.exhausted:
                        self._rules.remove(rule)
                    return rule
        return None


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it; ``time`` comes from the server's clock."""

    time: float
    monotonic: float
    method: str
    verb: str
    resource: str  # "pods", "pods/binding", "" for discovery and other paths
    namespace: str | None
    name: str | None
    path: str
    status: int
    query: str = ""
    user_agent: str = ""
    content_type: str = ""
    body: bytes = field(default=b"", repr=False)

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS


class RequestLog:
    """Every request (bounded) plus unbounded per-(resource, verb) counters."""

    def __init__(self, clock: Callable[[], float] = time.time, limit: int = 200_000):
        self.clock = clock
        self._lock = threading.Lock()
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=limit)
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)
            self._counts[(record.resource, record.verb)] += 1

    def reset(self) -> None:
        with self._lock:
            self._records.clear()
            self._counts.clear()

    def requests(
        self,
        verb: str | None = None,
        resource: str | None = None,
        *,
        namespace: str | None = None,
        name: str | None = None,
        since: float | None = None,
        writes_only: bool = False,
        ok_only: bool = False,
    ) -> list[RequestRecord]:
        """Matching records (globs as for faults); ``since`` compares with the server clock."""
        with self._lock:
            records = list(self._records)
        return [
            r
            for r in records
            if _match(verb, r.verb)
            and _match(resource, r.resource)
            and _match(namespace, r.namespace)
            and _match(name, r.name)
            and (since is None or r.time >= since)
            and (not writes_only or r.is_write)
            and (not ok_only or 200 <= r.status < 300)
        ]

    def writes(
        self,
        resource: str | None = None,
        verb: str | None = None,
        *,
        name: str | None = None,
        namespace: str | None = None,
        since: float | None = None,
        ok_only: bool = False,
    ) -> list[RequestRecord]:
        """Write requests (create, update, patch, delete, deletecollection)."""
        return self.requests(
            verb, resource, namespace=namespace, name=name, since=since, writes_only=True, ok_only=ok_only
        )

    def counts(self) -> collections.Counter[tuple[str, str]]:
        """All requests ever seen, by (resource, verb)."""
        with self._lock:
            return collections.Counter(self._counts)

    def write_counts(self) -> collections.Counter[tuple[str, str]]:
        """Write requests ever seen, by (resource, verb), failed ones included."""
        return collections.Counter({k: v for k, v in self.counts().items() if k[1] in WRITE_VERBS})
