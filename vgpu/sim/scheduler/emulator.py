"""Volcano scheduler emulator (docs/scheduler-emulator.md §9): the driver that talks to a Kubernetes API.

Two layers:

* :class:`vgpu.sim.scheduler.core.SchedulerCore` — pure: node decode, handshake decisions, the
  device ledger, fit/score, Allocate/Release. Unit-tested without any server.
* :class:`VolcanoSchedulerEmulator` (this module) — lists and watches Nodes, lists Pods, feeds the
  core, and performs the writes Volcano performs through the official ``kubernetes`` client:
  handshake PATCHes (≤ v1.15), the ``hamivgpu`` node lock (full Node Update, 5 retries 100 ms
  apart), the six pod keys (strategic-merge PATCH then Binding ≤ v1.15; on the Binding on master).

Every node add/update runs ``NewGPUDevices`` once, as in Volcano: with :meth:`start` (or
:meth:`run`) a node watch delivers every write as its own event; without it, :meth:`sync_nodes`
(called by :meth:`schedule_once`) treats each changed ``resourceVersion`` as one event, so writes
between two calls coalesce. :meth:`resync_nodes` forces an event on every node (a kubelet
heartbeat / informer resync). Time comes from ``clock`` (Unix seconds), so tests can run minutes
of simulated time; the only real waits are the lock retry interval and the loop period, both
interruptible by :meth:`stop`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from vgpu.protocol import (
    ProtocolError,
    annotations_patch,
    decode_node_lock,
    encode_node_lock,
    keys,
    node_lock_expired,
)
from vgpu.sim.scheduler.core import AllocationError, AllocationPlan, NodeDecision, SchedulerCore
from vgpu.sim.scheduler.model import PodView, SchedulerConfig

log = logging.getLogger(__name__)

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


@dataclass
class EmulatorCounters:
    """Writes the emulator made, and node writes by others that it observed."""

    node_events: int = 0
    """``NewGPUDevices`` runs."""
    handshake_requesting: int = 0
    """Our ``Requesting_…`` PATCHes."""
    handshake_deleted: int = 0
    """Our ``Deleted_…`` PATCHes."""
    lock_writes: int = 0
    lock_refusals: int = 0
    pod_patches: int = 0
    bindings: int = 0
    write_failures: int = 0
    observed_node_updates: int = 0
    """Node modifications seen (any writer, ours included)."""
    observed_handshake_writes: int = 0
    """Handshake values seen that we did not write (the plugin's ``Reported …``)."""
    observed_register_writes: int = 0
    """Changes of the register annotation seen after the first sighting of the node."""
    observed_lock_releases: int = 0
    """Times the ``hamivgpu`` key disappeared from a node."""

    @property
    def handshake_writes(self) -> int:
        return self.handshake_requesting + self.handshake_deleted


@dataclass
class ScheduleOutcome:
    """What happened to one pending pod in one cycle."""

    pod: str
    uid: str
    node: str | None
    annotations: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    node_reasons: dict[str, str] = field(default_factory=dict)
    scores: dict[str, int] = field(default_factory=dict)

    @property
    def scheduled(self) -> bool:
        return self.node is not None


def _meta(node: client.V1Node) -> client.V1ObjectMeta:
    """A Node's metadata: the API server always sends it (the generated model types it optional)."""
    assert node.metadata is not None
    return node.metadata


def _rv_newer(new: str, old: str | None) -> bool:
    if old is None:
        return True
    if new == old:
        return False
    if new.isdigit() and old.isdigit():
        return int(new) > int(old)
    return True


class VolcanoSchedulerEmulator:
    """A Volcano scheduler with the ``deviceshare`` vGPU plugin, against a real or simulated API server.

    ``api`` is a ``kubernetes.client.CoreV1Api``. ``config`` holds the version and scheduler args
    (:class:`~vgpu.sim.scheduler.model.SchedulerConfig`). Pods with ``spec.schedulerName ==
    scheduler_name`` and no node are scheduled, oldest first.
    """

    def __init__(
        self,
        api: client.CoreV1Api,
        config: SchedulerConfig | None = None,
        *,
        scheduler_name: str = "volcano",
        clock: Callable[[], float] = time.time,
        lock_retries: int = 5,
        lock_retry_interval: float = 0.1,
        watch_timeout: float = 2.0,
    ):
        self.api = api
        self.config = config or SchedulerConfig()
        self.switches = self.config.switches
        self.core = SchedulerCore(self.config)
        self.scheduler_name = scheduler_name
        self.clock = clock
        self.lock_retries = lock_retries
        self.lock_retry_interval = lock_retry_interval
        self.watch_timeout = watch_timeout
        self.outcomes: dict[str, ScheduleOutcome] = {}
        """Last outcome per pod key."""
        self._counters = EmulatorCounters()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._node_rv: dict[str, str] = {}
        self._node_annotations: dict[str, dict[str, str]] = {}
        self._schedulable: dict[str, bool] = {}
        self._our_handshake: dict[str, str] = {}

    # ---- public ---------------------------------------------------------------------------

    @property
    def counters(self) -> EmulatorCounters:
        with self._lock:
            return replace(self._counters)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), tz=UTC)

    def sync_nodes(self) -> int:
        """List nodes; run a node event for each new or changed one. Returns the number of events."""
        nodes = self.api.list_node().items
        with self._lock:
            events = 0
            names = set()
            for n in nodes:
                names.add(_meta(n).name)
                events += self._on_node(n)
            for gone in set(self._node_rv) - names:
                self._forget_node(gone)
            return events

    def resync_nodes(self) -> int:
        """Run a node event on every node, changed or not (heartbeat / informer resync)."""
        with self._lock:
            self._node_rv.clear()
        return self.sync_nodes()

    def node_event(self, name: str) -> NodeDecision:
        """Read one node and run ``NewGPUDevices`` on it now."""
        node = self.api.read_node(name)
        with self._lock:
            self._node_rv.pop(name, None)
            self._on_node(node)
            return self._last_decision

    def schedule_once(self) -> list[ScheduleOutcome]:
        """One scheduling cycle: sync nodes and pods, then try every pending pod in order."""
        with self._lock:
            self.core.begin_session()
            self.sync_nodes()
            pods = [PodView.from_k8s(p) for p in self.api.list_pod_for_all_namespaces().items]
            self.core.sync_pods(pods)
            candidates = [n for n, ok in self._schedulable.items() if ok]
            pending = sorted((p for p in pods if self._is_pending(p)), key=lambda p: (p.created, p.key))
            results = []
            for pod in pending:
                outcome = self._schedule(pod, candidates)
                self.outcomes[pod.key] = outcome
                results.append(outcome)
            return results

    def run(self, stop: threading.Event, interval: float = 0.1, watch_nodes: bool = True) -> None:
        """Schedule every ``interval`` seconds until ``stop`` is set; with ``watch_nodes`` a node
        watch thread delivers node events as they happen."""
        watcher = None
        if watch_nodes:
            watcher = threading.Thread(target=self._watch_nodes, args=(stop,), name="sched-node-watch", daemon=True)
            watcher.start()
        try:
            while not stop.is_set():
                try:
                    self.schedule_once()
                except Exception:  # the emulated scheduler never dies on an API error
                    log.exception("scheduling cycle failed")
                stop.wait(interval)
        finally:
            if watcher is not None:
                watcher.join(timeout=self.watch_timeout + 5)

    def start(self, interval: float = 0.1, watch_nodes: bool = True) -> None:
        """Run in a background thread (see :meth:`stop`)."""
        self._stop.clear()
        t = threading.Thread(target=self.run, args=(self._stop, interval, watch_nodes), name="sched-loop", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=timeout)
        alive = [t.name for t in self._threads if t.is_alive()]
        self._threads.clear()
        if alive:
            raise RuntimeError(f"scheduler emulator threads did not stop: {alive}")

    def __enter__(self) -> VolcanoSchedulerEmulator:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- nodes ----------------------------------------------------------------------------

    _last_decision: NodeDecision = NodeDecision(False, "no event yet")

    def _forget_node(self, name: str) -> None:
        self._node_rv.pop(name, None)
        self._node_annotations.pop(name, None)
        self._schedulable.pop(name, None)
        self.core.node_deleted(name)

    def _on_node(self, node: Any) -> int:
        """One node add/update event; returns 1 if it was processed, 0 if already seen."""
        md = node.metadata
        name, rv = md.name, md.resource_version or ""
        if not _rv_newer(rv, self._node_rv.get(name)):
            return 0
        self._node_rv[name] = rv
        ann = dict(md.annotations or {})
        self._observe(name, ann)
        alloc = {k: str(v) for k, v in ((node.status.allocatable or {}) if node.status else {}).items()}
        self._schedulable[name] = not (node.spec is not None and node.spec.unschedulable)
        decision = self.core.node_event(name, ann, alloc, self.now())
        self._last_decision = decision
        self._counters.node_events += 1
        if decision.handshake_write is not None:
            self._patch_handshake(name, decision.handshake_write)
        return 1

    def _observe(self, name: str, ann: dict[str, str]) -> None:
        prev = self._node_annotations.get(name)
        self._node_annotations[name] = ann
        if prev is None:
            return
        c = self._counters
        c.observed_node_updates += 1
        if ann.get(keys.REGISTER) != prev.get(keys.REGISTER):
            c.observed_register_writes += 1
        hs = ann.get(keys.HANDSHAKE)
        if hs != prev.get(keys.HANDSHAKE) and hs is not None and hs != self._our_handshake.get(name):
            c.observed_handshake_writes += 1
        if keys.NODE_LOCK in prev and keys.NODE_LOCK not in ann:
            c.observed_lock_releases += 1

    def _patch_handshake(self, name: str, value: str) -> None:
        try:
            self.api.patch_node(name, annotations_patch({keys.HANDSHAKE: value}), _content_type=STRATEGIC_MERGE)
        except ApiException as exc:
            self._counters.write_failures += 1
            log.warning("handshake patch of node %s failed: %s", name, exc.reason)
            return
        self._our_handshake[name] = value
        if value.startswith("Deleted"):
            self._counters.handshake_deleted += 1
        else:
            self._counters.handshake_requesting += 1

    def _watch_nodes(self, stop: threading.Event) -> None:
        rv: str | None = None
        w = watch.Watch()
        while not stop.is_set():
            try:
                if rv is None:
                    listed = self.api.list_node()
                    with self._lock:
                        for n in listed.items:
                            self._on_node(n)
                    assert listed.metadata is not None  # a list always has one
                    rv = listed.metadata.resource_version
                for ev in w.stream(
                    self.api.list_node,
                    resource_version=rv,
                    timeout_seconds=max(1, int(self.watch_timeout)),
                    _request_timeout=self.watch_timeout + 1,
                ):
                    obj = ev["object"]
                    if ev["type"] == "ERROR" or not hasattr(obj, "metadata"):
                        rv = None
                        break
                    rv = obj.metadata.resource_version or rv
                    with self._lock:
                        if ev["type"] in ("ADDED", "MODIFIED"):
                            self._on_node(obj)
                        elif ev["type"] == "DELETED":
                            self._forget_node(obj.metadata.name)
                    if stop.is_set():
                        break
            except Exception as exc:  # noqa: BLE001 - relist after any watch failure, as an informer does
                log.debug("node watch restarts after %r", exc)
                rv = None
                stop.wait(0.2)
        w.stop()

    # ---- pods -----------------------------------------------------------------------------

    def _is_pending(self, pod: PodView) -> bool:
        return (
            pod.scheduler_name == self.scheduler_name
            and not pod.node_name
            and not pod.deleting
            and pod.phase == "Pending"
        )

    def _schedule(self, pod: PodView, candidates: list[str]) -> ScheduleOutcome:
        chosen = self.core.filter_and_score(pod, candidates)
        out = ScheduleOutcome(pod.key, pod.uid, None, node_reasons=chosen.node_reasons, scores=chosen.scores)
        if chosen.node is None:
            detail = "; ".join(f"{n}: {r}" for n, r in sorted(chosen.node_reasons.items()))
            out.reason = f"0/{len(candidates)} nodes are unavailable" + (f": {detail}" if detail else "")
            return out
        try:
            plan = self.core.allocate(pod, chosen.node, self.now())
        except AllocationError as exc:
            out.reason = str(exc)
            return out
        if plan.annotations and self.config.node_lock_enable and self.switches.node_lock_honoured:
            err = self._lock_node(chosen.node)
            if err:
                self.core.release(plan)
                self._counters.lock_refusals += 1
                out.reason = f"node {chosen.node} locked for {pod.name} hamivgpu lockname {err}"
                return out
        self.core.commit(plan)
        try:
            self._write(plan)
        except ApiException as exc:
            self.core.release(plan)
            self._counters.write_failures += 1
            out.reason = f"writing the allocation failed: {exc.status} {exc.reason}"
            return out
        out.node = chosen.node
        out.annotations = dict(plan.annotations)
        return out

    def _write(self, plan: AllocationPlan) -> None:
        pod = plan.pod
        if self.switches.annotations_on_binding:
            self._bind(pod, plan.node, plan.annotations or None)
            return
        if plan.annotations:
            self.api.patch_namespaced_pod(
                pod.name, pod.namespace, annotations_patch(plan.annotations), _content_type=STRATEGIC_MERGE
            )
            self._counters.pod_patches += 1
        self._bind(pod, plan.node, None)

    def _bind(self, pod: PodView, node: str, annotations: dict[str, str] | None) -> None:
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod.name, namespace=pod.namespace, annotations=annotations),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        # The server answers with a Status, which the generated client cannot read as a V1Binding:
        # take the raw response, and drain it so the pooled connection stays usable.
        resp = cast(
            "urllib3.BaseHTTPResponse",  # what _preload_content=False returns (the stubs say V1Binding)
            self.api.create_namespaced_pod_binding(pod.name, pod.namespace, body, _preload_content=False),
        )
        resp.read()
        resp.release_conn()
        self._counters.bindings += 1

    def _lock_node(self, name: str) -> str:
        """``LockNode``; returns an error text, or ``""`` when the lock was taken."""
        node = self.api.read_node(name)
        ann = dict(_meta(node).annotations or {})
        now = self.now()
        if keys.NODE_LOCK in ann:
            try:
                locked_at = decode_node_lock(ann[keys.NODE_LOCK])
            except ProtocolError as exc:
                return str(exc)
            if not node_lock_expired(locked_at, now):
                return f"node {name} has been locked within 5 minutes"
        value = encode_node_lock(now.astimezone(self.config.tz))
        for attempt in range(self.lock_retries + 1):
            _meta(node).annotations = {**ann, keys.NODE_LOCK: value}
            try:
                self.api.replace_node(name, node)
            except ApiException as exc:
                if attempt == self.lock_retries:
                    return f"setNodeLock failed: failed to update node {name}: {exc.status} {exc.reason}"
                self._stop.wait(self.lock_retry_interval)
                node = self.api.read_node(name)
                ann = dict(_meta(node).annotations or {})
                continue
            self._counters.lock_writes += 1
            return ""
        return f"setNodeLock failed for node {name}"
