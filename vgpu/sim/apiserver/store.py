"""In-memory object store of the simulated API server: versions, history and watch fan-out.

Semantics follow the real apiserver + etcd where code under test can observe them:

- one global, monotonically increasing ``resourceVersion`` (a decimal string on the wire);
  every committed write bumps it, a no-op update or patch does not write at all;
- ``uid``, ``creationTimestamp`` and (for pods) ``generation`` are set by the server; an
  update carrying a stale ``resourceVersion`` fails with 409 Conflict;
- pods and nodes have a ``status`` subresource: the main resource ignores status changes,
  ``/status`` ignores spec changes; a pod's spec is immutable except for a few fields;
- a bounded history of changes lets a watch resume from a resourceVersion; older ones get
  410 Gone ("too old resource version"), as after an etcd compaction;
- objects with finalizers are only marked for deletion; pods bound to a node can be
  deleted gracefully (``graceful_pod_deletion=True``) like a real kubelet-backed cluster.

The per-resource rules of a change (defaults, validation, conflicts, the status split,
binding) are in ``strategy``; this module decides when a change is committed and who
hears about it. Deliberate simplifications: namespaces are created on first use and
deleting one deletes its objects at once; paginated lists continue from the live state
instead of a consistent snapshot; no admission plugins beyond the registry defaults.

Everything is guarded by one re-entrant lock; ``changed`` is notified on every commit, so
tests can wait for a state without sleeping (``wait_for``).
"""

from __future__ import annotations

import base64
import collections
import json
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from vgpu.sim.apiserver import errors, resources, strategy
from vgpu.sim.apiserver.errors import ApiError
from vgpu.sim.apiserver.patching import PatchError, json_patch, merge_patch, parse_patch_body, strategic_merge_patch
from vgpu.sim.apiserver.resources import ResourceType, storage_type
from vgpu.sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from vgpu.sim.apiserver.strategy import canonical, ordered
from vgpu.sim.apiserver.watch import Change, Stored, Watcher, WatchEvent, dumps

T = TypeVar("T")
Key = tuple[str, str]  # (namespace or "", name)

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
PATCH_TYPES = ("strategic", "merge", "json")
# The match-everything selectors, shared as defaults: both are frozen dataclasses.
ALL_FIELDS = FieldSelector()
ALL_LABELS = LabelSelector()


def _field_getter(rt: ResourceType, obj: dict[str, Any]) -> Callable[[str], str]:
    """The field-selector getter of one stored object."""
    return lambda k: rt.fields[k](obj)


def compile_selectors(
    rt: ResourceType, field_text: str | None, label_text: str | None
) -> tuple[FieldSelector, LabelSelector]:
    """Parse selectors for ``rt`` (400 on syntax errors or unsupported field labels)."""
    try:
        fields = parse_field_selector(field_text)
        labels = parse_label_selector(label_text)
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    if not fields.empty:
        reqs = []
        for r in fields.requirements:
            key = rt.field_aliases.get(r.key, r.key)
            if key not in rt.fields:
                raise errors.bad_request(f"field label not supported: {r.key}")
            reqs.append(type(r)(key, r.value, r.negate))
        fields = FieldSelector(tuple(reqs))
    return fields, labels


def _encode_continue(rv: int, key: Key) -> str:
    return base64.urlsafe_b64encode(dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)})).decode()


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        ns, name = doc["start"]
        return int(doc["rv"]), (str(ns), str(name))
    except (ValueError, KeyError, TypeError):
        raise errors.bad_request(f"continue key is not valid: {token!r}") from None


class Store:
    """All objects of the simulated cluster. Public methods take and return plain dicts."""

    def __init__(
        self,
        *,
        history_size: int = 5000,
        clock: Callable[[], float] = time.time,
        graceful_pod_deletion: bool = False,
        namespaces: tuple[str, ...] = DEFAULT_NAMESPACES,
    ):
        self.clock = clock
        self.graceful_pod_deletion = graceful_pod_deletion
        self._lock = threading.RLock()
        self.changed = threading.Condition(self._lock)
        self._generation = 0  # bumped with every notify of ``changed`` (see wait_for)
        self._objects: dict[str, dict[Key, Stored]] = {k: {} for k in resources.STORAGE}
        self._watchers: dict[str, list[Watcher]] = {k: [] for k in resources.STORAGE}
        self._pods_by_node: dict[str, set[Key]] = collections.defaultdict(set)
        self._history: collections.deque[Change] = collections.deque()
        self._history_size = max(1, history_size)
        self._compacted = 0  # changes with rv <= this may be missing from the history
        self._rv = 1
        for ns in namespaces:
            self.create("namespaces", {"metadata": {"name": ns}})

    # ---------------------------------------------------------------- basics

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        if rt.namespaced:
            if not namespace:
                raise errors.bad_request(f"{rt.plural} are namespaced: a namespace is required")
            return (namespace, name)
        return ("", name)

    def _now(self) -> str:
        return strategy.rfc3339(self.clock())

    def _commit(self, resource: str, key: Key, obj: dict[str, Any], kind: str, old: Stored | None) -> Stored:
        """Write one change: bump the version, update indexes, record history, fan out."""
        self._rv += 1
        rv = self._rv
        obj["metadata"]["resourceVersion"] = str(rv)
        stored = Stored(ordered(obj), rv)
        table = self._objects[resource]
        if kind == "DELETED":
            table.pop(key, None)
        else:
            table[key] = stored
        if resource == "pods":
            if old is not None:
                self._pods_by_node[(old.obj.get("spec") or {}).get("nodeName") or ""].discard(key)
            if kind != "DELETED":
                self._pods_by_node[(stored.obj.get("spec") or {}).get("nodeName") or ""].add(key)
        change = Change(rv, kind, resource, stored, old)
        self._history.append(change)
        while len(self._history) > self._history_size:
            self._compacted = self._history.popleft().rv
        watchers = self._watchers[resource]
        for w in watchers:
            w.offer(change)
        if any(w.closed for w in watchers):
            self._watchers[resource] = [w for w in watchers if not w.closed]
        self._changed()
        return stored

    def _ensure_namespace(self, namespace: str) -> None:
        if ("", namespace) not in self._objects["namespaces"]:
            self.create("namespaces", {"metadata": {"name": namespace}})

    # ---------------------------------------------------------------- reads

    def get_stored(self, resource: str, namespace: str | None, name: str) -> Stored:
        rt = storage_type(resource)
        with self._lock:
            stored = self._objects[resource].get(self._key(rt, namespace, name))
        if stored is None:
            raise errors.not_found(rt.qualified, name)
        return stored

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        """A copy of the object; raises ApiError 404 when absent."""
        return self.get_stored(resource, namespace, name).copy()

    def try_get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return self.get(resource, namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def count(self, resource: str) -> int:
        with self._lock:
            return len(self._objects[resource])

    def _check_list_rv(self, resource_version: str | None, match: str | None) -> None:
        if resource_version in (None, "", "0"):
            return
        try:
            want = int(resource_version)
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {resource_version!r}") from None
        if want > self._rv:
            raise ApiError(
                504,
                f"Too large resource version: {want}, current: {self._rv}",
                "Timeout",
                {
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1,
                },
            )
        if match == "Exact" and want != self._rv:
            raise errors.gone(f"too old resource version: {want} ({self._rv})")

    def list_stored(
        self,
        resource: str,
        namespace: str | None = None,
        fields: FieldSelector = ALL_FIELDS,
        labels: LabelSelector = ALL_LABELS,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> tuple[list[Stored], int, str | None, int | None]:
        """(items, list resourceVersion, continue token, remainingItemCount) in key order."""
        rt = storage_type(resource)
        with self._lock:
            self._check_list_rv(resource_version, resource_version_match)
            list_rv = self._rv
            start: Key | None = None
            if continue_token:
                token_rv, start = _decode_continue(continue_token)
                if token_rv < self._compacted:
                    raise errors.gone(
                        "The provided continue parameter is too old to display a consistent "
                        "list result. You can start a new list without the continue "
                        "parameter."
                    )
                list_rv = token_rv
            table = self._objects[resource]
            node = fields.exact("spec.nodeName") if resource == "pods" else None
            if node is not None:
                keys = sorted(k for k in self._pods_by_node.get(node, ()) if k in table)
            else:
                keys = sorted(table)
            if namespace:
                keys = [k for k in keys if k[0] == namespace]
            if start is not None:
                keys = [k for k in keys if k > start]
            out: list[Stored] = []
            token = None
            remaining = None
            check_fields = not fields.empty
            check_labels = not labels.empty
            for i, key in enumerate(keys):
                stored = table[key]
                obj = stored.obj
                if check_labels and not labels.matches(obj["metadata"].get("labels")):
                    continue
                if check_fields and not fields.matches(_field_getter(rt, obj)):
                    continue
                if limit and len(out) >= limit:
                    token = _encode_continue(list_rv, out[-1].key())
                    if fields.empty and labels.empty:
                        remaining = len(keys) - i
                    break
                out.append(stored)
            return out, list_rv, token, remaining

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Copies of the matching objects (selectors in query-string syntax)."""
        fields, labels = compile_selectors(storage_type(resource), field_selector, label_selector)
        items, _, _, _ = self.list_stored(resource, namespace, fields, labels)
        return [s.copy() for s in items]

    # ---------------------------------------------------------------- create

    def create_stored(self, resource: str, obj: Any, namespace: str | None = None, *, dry_run: bool = False) -> Stored:
        rt = storage_type(resource)
        obj = strategy.prepare_body(rt, obj, namespace)
        meta = obj["metadata"]
        with self._lock:
            name = strategy.assign_name(rt, meta)
            name_causes = resources.validate_name(rt.kind, name)
            key = self._key(rt, meta.get("namespace"), name)
            if not name_causes and key in self._objects[resource]:
                raise errors.already_exists(rt.qualified, name)
            strategy.finish_create(rt, obj, self._now(), name_causes)
            if dry_run:
                return Stored(ordered(obj), self._rv)
            if rt.namespaced:
                self._ensure_namespace(key[0])
            return self._commit(resource, key, obj, "ADDED", None)

    def create(self, resource: str, obj: Any, namespace: str | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """Create and return the stored object (409 AlreadyExists, 422 Invalid)."""
        return self.create_stored(resource, obj, namespace, dry_run=dry_run).copy()

    # ---------------------------------------------------------------- update / patch

    def _commit_update(self, resource: str, cur: Stored, new: dict[str, Any], dry_run: bool) -> Stored:
        key = (cur.namespace, cur.name)
        if ordered(new) == cur.obj:
            return cur  # no-op: nothing is written, no event, same resourceVersion
        if dry_run:
            return Stored(ordered(new), cur.rv)
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and cur.obj["metadata"].get("finalizers") and not meta.get("finalizers"):
            return self._commit(resource, key, new, "DELETED", cur)
        return self._commit(resource, key, new, "MODIFIED", cur)

    def update_stored(
        self,
        resource: str,
        obj: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        """(stored, created): PUT semantics, creating only where the real registry allows it."""
        rt = storage_type(resource)
        obj = strategy.prepare_body(rt, obj, namespace)
        name = obj["metadata"].get("name")
        if not name:
            raise errors.invalid(rt.kind, "", [("metadata.name", "FieldValueRequired", "Required value")])
        with self._lock:
            cur = self._objects[resource].get(self._key(rt, obj["metadata"].get("namespace"), name))
            if cur is None:
                if rt.create_on_update and subresource is None:
                    return self.create_stored(resource, obj, dry_run=dry_run), True
                raise errors.not_found(rt.qualified, name)
            new = strategy.prepare_update(rt, cur, obj, subresource)
            return self._commit_update(resource, cur, new, dry_run), False

    def update(
        self,
        resource: str,
        obj: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Replace an object (409 Conflict when its resourceVersion is stale)."""
        return self.update_stored(resource, obj, namespace, subresource=subresource, dry_run=dry_run)[0].copy()

    def patch_stored(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: Any,
        patch_type: str = "strategic",
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        view: tuple[Callable[[dict], dict], Callable[[dict], dict]] | None = None,
    ) -> Stored:
        """Patch; ``view`` = (to API shape, back to storage shape) when the API differs from storage."""
        rt = storage_type(resource)
        if patch_type not in PATCH_TYPES:
            raise errors.unsupported_media_type(patch_type)
        try:
            if isinstance(patch, (bytes, str)):
                patch = parse_patch_body(patch, list if patch_type == "json" else dict)
            elif not isinstance(patch, list if patch_type == "json" else dict):
                raise PatchError("the patch has the wrong top-level type for its patch type", 400)
        except PatchError as exc:
            raise ApiError(exc.status, str(exc)) from None
        with self._lock:
            cur = self._objects[resource].get(self._key(rt, namespace, name))
            if cur is None:
                raise errors.not_found(rt.qualified, name)
            base = cur.copy() if view is None else view[0](cur.copy())
            try:
                if patch_type == "merge":
                    new = merge_patch(base, patch)
                elif patch_type == "json":
                    new = json_patch(base, patch)
                else:
                    new = strategic_merge_patch(base, patch, rt.kind)
            except PatchError as exc:
                raise ApiError(exc.status, str(exc)) from None
            if view is not None and isinstance(new, dict):
                new = view[1](new)
            new = canonical(new, "patched object")
            prepared = strategy.prepare_update(rt, cur, new, subresource)
            return self._commit_update(resource, cur, prepared, dry_run)

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        patch: Any,
        patch_type: str = "strategic",
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Apply a ``strategic`` | ``merge`` | ``json`` patch (dict/list or JSON text)."""
        return self.patch_stored(
            resource, namespace, name, patch, patch_type, subresource=subresource, dry_run=dry_run
        ).copy()

    # ---------------------------------------------------------------- binding

    def bind_stored(self, namespace: str, binding: Any, pod_name: str | None = None) -> Stored:
        """POST pods/NAME/binding: set spec.nodeName, copy the Binding's annotations onto the pod."""
        name, node, annotations, uid = strategy.parse_binding(namespace, binding, pod_name)
        with self._lock:
            cur = self._objects["pods"].get((namespace, name))
            if cur is None:
                raise errors.not_found("pods", name)
            new = strategy.bound_pod(cur, node, annotations, uid, self._now())
            return self._commit("pods", (namespace, name), new, "MODIFIED", cur)

    def bind(
        self, namespace: str, pod_name: str, node: str, annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """In-process binding (same rules as POST pods/NAME/binding); returns the pod."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod_name, "namespace": namespace, "annotations": annotations or {}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return self.bind_stored(namespace, binding, pod_name).copy()

    # ---------------------------------------------------------------- delete

    def delete_stored(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        """(last content, deleted now). Not deleted now: finalizers or graceful pod deletion pending."""
        rt = storage_type(resource)
        with self._lock:
            key = self._key(rt, namespace, name)
            cur = self._objects[resource].get(key)
            if cur is None:
                raise errors.not_found(rt.qualified, name)
            strategy.check_delete_preconditions(rt, cur, preconditions)
            meta = cur.obj["metadata"]
            graceful = resource == "pods" and self.graceful_pod_deletion
            grace = strategy.pod_grace_period(cur, grace_period_seconds) if graceful else 0
            if meta.get("finalizers") or grace > 0:
                if meta.get("deletionTimestamp"):
                    return cur, False
                if dry_run:
                    return cur, False
                new = cur.copy()
                new["metadata"]["deletionTimestamp"] = strategy.rfc3339(self.clock() + grace)
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                return self._commit(resource, key, new, "MODIFIED", cur), False
            if dry_run:
                return cur, True
            if resource == "namespaces":
                for table_name, table in self._objects.items():
                    if resources.STORAGE[table_name].namespaced:
                        for k in [k for k in table if k[0] == name]:
                            self._commit(table_name, k, table[k].copy(), "DELETED", table[k])
            return self._commit(resource, key, cur.copy(), "DELETED", cur), True

    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Delete (or mark for deletion) and return the last content."""
        return self.delete_stored(
            resource, namespace, name, grace_period_seconds=grace_period_seconds, preconditions=preconditions
        )[0].copy()

    # ---------------------------------------------------------------- watch

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        fields: FieldSelector = ALL_FIELDS,
        labels: LabelSelector = ALL_LABELS,
        *,
        resource_version: str | None = None,
        send_initial_events: bool | None = None,
        allow_bookmarks: bool = False,
    ) -> Watcher:
        """Open a watch; with no (or "0") resourceVersion it starts with ADDED for every match."""
        rt = storage_type(resource)
        since = None
        if resource_version not in (None, "", "0"):
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(f"invalid resource version: {resource_version!r}") from None
        w = Watcher(resource, namespace, fields, labels, lambda obj, k: rt.fields[k](obj))
        with self._lock:
            initial = send_initial_events if send_initial_events is not None else since is None
            if initial:
                table = self._objects[resource]
                for key in sorted(table):
                    stored = table[key]
                    if w.matches(stored):
                        w.put(WatchEvent("ADDED", stored))
                if send_initial_events and allow_bookmarks:
                    w.put(WatchEvent("BOOKMARK", rv=self._rv, annotations={"k8s.io/initial-events-end": "true"}))
            if since is not None:
                # With initial events the version only means "not older than": the current state serves.
                if not initial and since < self._compacted:
                    oldest = self._history[0].rv if self._history else self._rv + 1
                    w.put(
                        WatchEvent(
                            "ERROR", error=errors.gone(f"too old resource version: {since} ({oldest - 1})").status()
                        )
                    )
                    w.close()
                    return w
                if not initial:
                    for change in self._history:
                        if change.rv > since and change.resource == resource:
                            w.offer(change)
            self._watchers[resource].append(w)
            self._changed()
        return w

    def bookmark(self, watcher: Watcher) -> int | None:
        """A resourceVersion safe to bookmark for ``watcher``: only when nothing is queued for it."""
        with self._lock:
            return self._rv if watcher.idle() else None

    def unwatch(self, watcher: Watcher) -> None:
        watcher.close()
        with self._lock:
            watchers = self._watchers.get(watcher.resource, [])
            if watcher in watchers:
                watchers.remove(watcher)
            self._changed()

    def close_watches(self, abrupt: bool = False) -> int:
        """End every open watch (clients see the stream end, or a reset when ``abrupt``)."""
        with self._lock:
            n = 0
            for watchers in self._watchers.values():
                for w in watchers:
                    w.close(abrupt)
                    n += 1
                watchers.clear()
            self._changed()
            return n

    def watch_count(self, resource: str | None = None) -> int:
        with self._lock:
            if resource:
                return len(self._watchers[resource])
            return sum(len(ws) for ws in self._watchers.values())

    def compact(self) -> int:
        """Forget the whole history (like an etcd compaction): older watches get 410 Gone."""
        with self._lock:
            self._history.clear()
            self._compacted = self._rv
            return self._rv

    # ---------------------------------------------------------------- waiting

    def _changed(self) -> None:
        """Wake ``wait_for`` callers (the store lock is held)."""
        self._generation += 1
        self.changed.notify_all()

    def wait_for(self, predicate: Callable[[Store], T], timeout: float, what: str = "condition") -> T:
        """Block until ``predicate(store)`` is truthy or raise TimeoutError.

        The predicate is re-checked on every commit and whenever a watch opens or closes.  It runs
        WITHOUT the store lock held: a predicate may look at other components (a scheduler's
        counters, a request log) whose own threads call into this store while holding their locks,
        and holding ours around it would deadlock them.  A generation counter makes sure no change
        between a check and the wait is missed.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                seen = self._generation
            result = predicate(self)
            if result:
                return result
            with self.changed:
                while self._generation == seen:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
                    self.changed.wait(left)
