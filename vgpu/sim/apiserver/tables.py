"""Server-side printing: ``meta.k8s.io`` Tables for ``kubectl get`` without ``-o``.

kubectl asks for ``application/json;as=Table;g=meta.k8s.io;v=v1`` and prints the columns the
server chose, so plain ``kubectl get pods -A`` output looks like a real cluster's (NAME, READY,
STATUS, RESTARTS, AGE ...). Columns and cell rules follow the real printers for the kinds the
simulator serves; other kinds get NAME and AGE.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

Column = tuple[str, str, int, str]  # name, type, priority, description


def human_duration(seconds: float) -> str:
    """Age as kubectl prints it (``45s``, ``3m20s``, ``5h``, ``2d3h`` ...)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _parse_time(ts: Any) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return float(calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _age(ts: Any, now: float) -> str:
    t = _parse_time(ts)
    return "<unknown>" if t is None else human_duration(now - t)


# ------------------------------------------------------------------ per-kind rows


def _pod_status(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    running = False
    for cs in reversed(status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            reason = (
                f"Signal:{terminated['signal']}"
                if terminated.get("signal")
                else f"ExitCode:{terminated.get('exitCode', 0)}"
            )
        elif cs.get("ready") and state.get("running") is not None:
            running = True
    if reason == "Completed" and running:
        reason = "Running"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason


def _pod_row(pod: dict[str, Any], now: float) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount", 0)) for cs in statuses)
    gates = spec.get("readinessGates") or []
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        _pod_status(pod),
        str(restarts),
        _age(pod["metadata"].get("creationTimestamp"), now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _node_row(node: dict[str, Any], now: float) -> list[Any]:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    ready_status: Any = (ready or {}).get("status")
    state = {"True": "Ready", "False": "NotReady"}.get(ready_status, "Unknown")
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = meta.get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        meta["name"],
        state,
        ",".join(r for r in roles if r) or "<none>",
        _age(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _event_row(ev: dict[str, Any], now: float) -> list[Any]:
    involved = ev.get("involvedObject") or {}
    last = ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("series") or {}).get("lastObservedTime")
    first = ev.get("firstTimestamp") or ev.get("eventTime")
    source = ev.get("source") or {}
    src = source.get("component") or ev.get("reportingComponent") or ""
    if source.get("host"):
        src += ", " + source["host"]
    return [
        _age(last, now),
        ev.get("type", ""),
        ev.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        src,
        ev.get("message", "").strip(),
        _age(first, now),
        int(ev.get("count") or 1),
        ev["metadata"]["name"],
    ]


def _configmap_row(cm: dict[str, Any], now: float) -> list[Any]:
    return [
        cm["metadata"]["name"],
        len(cm.get("data") or {}) + len(cm.get("binaryData") or {}),
        _age(cm["metadata"].get("creationTimestamp"), now),
    ]


def _namespace_row(ns: dict[str, Any], now: float) -> list[Any]:
    return [
        ns["metadata"]["name"],
        (ns.get("status") or {}).get("phase", ""),
        _age(ns["metadata"].get("creationTimestamp"), now),
    ]


def _default_row(obj: dict[str, Any], now: float) -> list[Any]:
    return [obj["metadata"]["name"], _age(obj["metadata"].get("creationTimestamp"), now)]


_NAME = ("Name", "string", 0, "Name must be unique within a namespace.")
_AGE = (
    "Age",
    "string",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
)

PRINTERS: dict[str, tuple[list[Column], Callable[[dict[str, Any], float], list[Any]]]] = {
    "Pod": (
        [
            _NAME,
            ("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
            ("Status", "string", 0, "The aggregate status of the containers in this pod."),
            ("Restarts", "string", 0, "The number of times the containers in this pod have been restarted."),
            _AGE,
            ("IP", "string", 1, "IP address allocated to the pod."),
            ("Node", "string", 1, "Name of the Node this pod is assigned to."),
            ("Nominated Node", "string", 1, "Name of the node nominated for this pod."),
            ("Readiness Gates", "string", 1, "Pod readiness gates."),
        ],
        _pod_row,
    ),
    "Node": (
        [
            _NAME,
            ("Status", "string", 0, "The status of the node"),
            ("Roles", "string", 0, "The roles of the node"),
            _AGE,
            ("Version", "string", 0, "Kubelet Version reported by the node."),
            ("Internal-IP", "string", 1, "List of internal IPs."),
            ("External-IP", "string", 1, "List of external IPs."),
            ("OS-Image", "string", 1, "OS image reported by the node."),
            ("Kernel-Version", "string", 1, "Kernel version reported by the node."),
            ("Container-Runtime", "string", 1, "Container runtime reported by the node."),
        ],
        _node_row,
    ),
    "Event": (
        [
            ("Last Seen", "string", 0, "Time when last event occurred"),
            ("Type", "string", 0, "Type of this event."),
            ("Reason", "string", 0, "Reason of this event."),
            ("Object", "string", 0, "The object this event is about."),
            ("Subobject", "string", 1, "The subobject this event is about."),
            ("Source", "string", 1, "The component that reported this event."),
            ("Message", "string", 0, "A human-readable description of the status of this operation."),
            ("First Seen", "string", 1, "Time when first event occurred"),
            ("Count", "integer", 1, "Number of times this event has occurred."),
            ("Name", "string", 1, "Name of the event."),
        ],
        _event_row,
    ),
    "ConfigMap": ([_NAME, ("Data", "string", 0, "Number of data entries."), _AGE], _configmap_row),
    "Namespace": ([_NAME, ("Status", "string", 0, "The status of the namespace"), _AGE], _namespace_row),
}


def wants_table(accept: str) -> str | None:
    """The Table version (``v1`` or ``v1beta1``) the Accept header asks for first, if any."""
    for part in accept.split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip() for p in part.split(";")[1:] if "=" in p}
        if params.get("as") == "Table" and params.get("g", "meta.k8s.io") == "meta.k8s.io":
            return params.get("v", "v1")
    return None


def to_table(
    kind: str,
    objects: list[dict[str, Any]],
    *,
    resource_version: str,
    now: float,
    version: str = "v1",
    include_object: str = "Metadata",
    continue_token: str | None = None,
) -> dict[str, Any]:
    """A ``Table`` with one row per object; ``objects`` carry kind and apiVersion."""
    columns, row_of = PRINTERS.get(kind, ([_NAME, _AGE], _default_row))
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": row_of(obj, now)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": meta,
        "columnDefinitions": [
            {"name": n, "type": t, "format": "name" if n == "Name" and p == 0 else "", "description": d, "priority": p}
            for n, t, p, d in columns
        ],
        "rows": rows,
    }
