"""Conversion between core/v1 Event and events.k8s.io/v1 Event.

The real server keeps one storage for both APIs and converts on the way in and out, so an
event created through either group is visible through both (``kubectl describe`` reads the
core one). The simulator stores the core shape; these functions translate field names.
"""

from __future__ import annotations

from typing import Any

# (core field, events.k8s.io/v1 field)
_FIELDS = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
)
_SAME = ("metadata", "eventTime", "series", "reportingInstance", "action", "reason", "related", "type")

#: field-selector keys of events.k8s.io mapped to the core ones the store indexes.
FIELD_KEYS = {
    "regarding.kind": "involvedObject.kind",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name",
    "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
}


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    """events.k8s.io/v1 -> core/v1 (storage) shape."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "v1"}
    for key in _SAME:
        if key in event:
            out[key] = event[key]
    for core, new in _FIELDS:
        if new in event:
            out[core] = event[new]
    if "series" in out and isinstance(out["series"], dict):
        out["count"] = out["series"].get("count", out.get("count"))
    return out


def from_core(event: dict[str, Any]) -> dict[str, Any]:
    """core/v1 (storage) -> events.k8s.io/v1 shape."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for key in _SAME:
        if key in event:
            out[key] = event[key]
    # eventTime has no omitempty in events.k8s.io/v1: a core event without one shows null.
    out.setdefault("eventTime", None)
    for core, new in _FIELDS:
        if core in event:
            out[new] = event[core]
    return out
