"""Kubernetes Events the plugin posts (docs/decisions.md decision 6: every allocation failure is visible).

Core/v1 Events, named like client-go's recorder (``<object>.<unix-nanos in hex>``), with
``source.component`` = :data:`COMPONENT` and ``source.host`` = this node, so
``kubectl describe pod`` shows them next to the kubelet's ``UnexpectedAdmissionError``.
Node events use the kubelet's convention: namespace ``default``, ``uid`` = the node name.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from vgpu.kube.client import KubeClient

COMPONENT = "vgpu-device-plugin"
MAX_MESSAGE = 1024
"""The kubelet's recorder truncates event messages to 1 KiB; so do we."""

# Reasons (docs/protocol.md §10; a zero memory limit means unlimited: docs/hami-core.md §3.2)
REASON_ALLOCATION_FAILED = "VGPUAllocationFailed"
REASON_ZERO_MEMORY_LIMIT = "VGPUZeroMemoryLimit"
REASON_NO_POD = "VGPUNoPendingPod"
REASON_UNLIMITED_CONTAINER = "VGPUContainerUnlimited"
REASON_KUBELET_SHORTAGE = "VGPUKubeletShortage"
"""docs/failures.md A-12: a pod the scheduler placed here waits, but the kubelet has too few free
vgpu-number IDs left to admit it; the kubelet refuses it itself and never calls the plugin."""


def _now_rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _truncate(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def pod_reference(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": meta.get("namespace", "default"),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": str(meta.get("resourceVersion", "")),
    }


def node_reference(node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_name}


def build_event(
    involved: dict[str, Any], event_type: str, reason: str, message: str, host: str, now: float | None = None
) -> dict[str, Any]:
    """The Event body (one place builds it; tests and the demo read the same fields)."""
    t = time.time() if now is None else now
    namespace = involved.get("namespace") or "default"
    stamp = _now_rfc3339(t)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved.get('name', 'unknown')}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": _truncate(message),
        "type": event_type,
        "source": {"component": COMPONENT, "host": host},
        "reportingComponent": COMPONENT,
        "reportingInstance": host,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventRecorder:
    """Posts Warning/Normal events; raises :class:`vgpu.kube.client.KubeError` when it cannot."""

    def __init__(self, client: KubeClient, host: str):
        self.client = client
        self.host = host

    def pod_event(self, pod: Mapping[str, Any], reason: str, message: str, event_type: str = "Warning") -> None:
        ref = pod_reference(pod)
        self.client.create_event(ref["namespace"], build_event(ref, event_type, reason, message, self.host))

    def node_event(self, node_name: str, reason: str, message: str, event_type: str = "Warning") -> None:
        ref = node_reference(node_name)
        self.client.create_event("default", build_event(ref, event_type, reason, message, self.host))
