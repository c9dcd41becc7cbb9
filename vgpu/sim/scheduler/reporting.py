"""What Volcano tells the user about a pod it cannot place: a ``FailedScheduling`` Event and a
``PodScheduled=False`` condition (docs/scheduler-emulator.md §9.10).

Volcano's scheduler cache does both in one step for every pending task at the end of a cycle:
the condition is ``{type: PodScheduled, status: "False", reason: Unschedulable, message}`` and,
only when that condition changes (same status, reason and message: nothing is written), a Warning
Event with reason ``FailedScheduling`` and the same message.  The message is Volcano's fit-error
histogram: ``0/<nodes> nodes are unavailable: <count> <reason>, <count> <reason>.`` with the
``"<count> <reason>"`` strings sorted as strings; with no per-node reason it is
``all nodes are unavailable``.

The emulator decides the per-node reasons (vgpu/sim/scheduler/core.py); this module only words
and writes them, so the emulator's hook is one call per unplaced pod.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from vgpu.kube.events import build_event, pod_reference

log = logging.getLogger(__name__)

REASON_FAILED_SCHEDULING = "FailedScheduling"
CONDITION_REASON = "Unschedulable"
ALL_NODES_UNAVAILABLE = "all nodes are unavailable"
SOURCE = "volcano"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


def fit_errors_message(node_count: int, node_reasons: Mapping[str, str]) -> str:
    """Volcano's ``FitErrors.Error()``: a sorted histogram of the per-node reasons."""
    if not node_reasons:
        return ALL_NODES_UNAVAILABLE
    counts = Counter(node_reasons.values())
    histogram = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{node_count} nodes are unavailable: {', '.join(histogram)}."


class UnschedulableReporter:
    """Writes the condition and the Event for pods the emulator could not place, once per change."""

    def __init__(self, api: client.CoreV1Api, clock: Callable[[], float] = time.time):
        self.api = api
        self.clock = clock
        self._last: dict[str, str] = {}  # pod uid -> the message last written
        self.events_written = 0
        self.write_failures = 0

    def unschedulable(self, raw_pod: Mapping[str, Any], message: str) -> None:
        """Report ``message`` for the pending pod ``raw_pod`` (its API JSON), unless already reported."""
        meta = raw_pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if self._last.get(uid) == message or self._condition_says(raw_pod, message):
            self._last[uid] = message
            return
        ns, name = str(meta.get("namespace", "default")), str(meta.get("name", ""))
        now = self.clock()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": CONDITION_REASON,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
        event = build_event(pod_reference(raw_pod), "Warning", REASON_FAILED_SCHEDULING, message, "", now)
        event["source"] = {"component": SOURCE}
        event["reportingComponent"] = SOURCE
        event["reportingInstance"] = SOURCE
        try:
            self.api.create_namespaced_event(ns, event)  # type: ignore[arg-type]  # a dict body is sent as JSON
            self.api.patch_namespaced_pod_status(
                name, ns, {"status": {"conditions": [condition]}}, _content_type=STRATEGIC_MERGE
            )
        except ApiException as exc:
            self.write_failures += 1
            log.warning("reporting pod %s/%s unschedulable failed: %s %s", ns, name, exc.status, exc.reason)
            return
        self.events_written += 1
        self._last[uid] = message

    def report(self, pod: Any, reason: str, node_reasons: Mapping[str, str], node_count: int, fitted: bool) -> None:
        """The emulator's hook: ``pod`` is the listed ``V1Pod``; with no node passing the filter
        (``fitted`` False) the message is the fit-error histogram, else the emulator's ``reason``."""
        message = reason if fitted else fit_errors_message(node_count, node_reasons)
        self.unschedulable(client.ApiClient().sanitize_for_serialization(pod), message)

    def message_for(self, uid: str) -> str | None:
        """The message last reported for the pod ``uid`` (what its Event and condition say)."""
        return self._last.get(uid)

    @staticmethod
    def _condition_says(raw_pod: Mapping[str, Any], message: str) -> bool:
        for c in (raw_pod.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled":
                return bool(
                    c.get("status") == "False" and c.get("reason") == CONDITION_REASON and c.get("message") == message
                )
        return False
